"""Measuring loopscope against a person's labels: the scorer shared by the benchmark on real transcripts and by the
user's own evaluation."""
