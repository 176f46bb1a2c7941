"""loopscope: find doom loops in coding-agent transcripts, what they cost, and how loop guards would have done."""

__version__ = "0.1.0"
