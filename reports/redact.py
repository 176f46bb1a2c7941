"""Secret redaction for every piece of transcript text a report shows.

Transcripts are full of credentials an agent read or typed: a report that is shared (attached to an issue, put on an
intranet) must not carry them. Redaction is on by default; ``--no-redact`` turns it off for a private look.

Arguments are stored as canonical JSON, so a secret often sits inside a JSON string: quotes arrive escaped (``\\"``)
and newlines as the two characters ``\\n``. Every pattern below stops at a quote or a backslash for that reason.
A match is replaced by ``[REDACTED <family>]``; the name of an assignment or header is kept so a reader still sees
*what* was there.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

MARK = "[REDACTED {}]"
CACHED_TEXTS = 4096
"""Distinct texts whose redaction is kept (``_redacted``): each is a shown window of at most a few kB."""


@dataclass(frozen=True)
class Rule:
    """One family of secrets. ``keep`` is the regex group kept verbatim before the marker (a header or variable
    name), so ``API_KEY=abc`` becomes ``API_KEY=[REDACTED assignment]``. ``only`` is the group that is the secret
    when the match holds more than it (``postgres://user:PASS@host``): just that group is replaced."""

    family: str
    pattern: re.Pattern[str]
    keep: int | None = None
    only: int | None = None


# A value inside shell text or a JSON string: stops at whitespace, quotes, a backslash (JSON escapes) and separators.
_VAL = r"[^\s\"'`\\,;&|<>(){}\[\]]"
_NAME = (
    r"(?:[A-Za-z0-9_]*_(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD|PWD)|password|passwd|pwd|secret|token|api_?key"
    r"|access_?key|auth_?token|client_?secret|private_?key)"
)
# A value that is a call (``token = get_token()``) is code, not a secret.
_NOT_CALL = r"(?!" + _VAL + r"+\()"

RULES: tuple[Rule, ...] = (
    # PEM first: its body would otherwise be cut up by the token rules. A key truncated before its END line (a
    # clipped result) is redacted to the end of the base64 body.
    Rule(
        "private-key",
        re.compile(
            r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----"
            r"(?:.*?-----END[A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----|(?:[A-Za-z0-9+/=:\s-]|\\[nr])*)",
            re.S,
        ),
    ),
    Rule("anthropic-key", re.compile(r"\bsk-ant-[A-Za-z0-9]{2,10}-[A-Za-z0-9_\-]{20,}")),
    Rule(
        "openai-key",
        re.compile(
            r"\bsk-(?:proj-|svcacct-|admin-|None-)?[A-Za-z0-9_\-]{0,200}?T3BlbkFJ[A-Za-z0-9_\-]+"
            r"|\bsk-(?:proj|svcacct|admin)-[A-Za-z0-9_\-]{20,}"
            r"|\bsk-[A-Za-z0-9]{32,}\b"
        ),
    ),
    Rule("aws-key", re.compile(r"\b(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[0-9A-Z]{16}\b")),
    Rule("github-token", re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})")),
    Rule(
        "slack-token",
        re.compile(
            r"\bxox[abposr](?:-[A-Za-z0-9]+){2,}|\bxapp-\d-[A-Za-z0-9-]{10,}"
            r"|https://hooks\.slack\.com/(?:services|workflows)/[A-Za-z0-9/_-]+"
        ),
    ),
    Rule("stripe-key", re.compile(r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}|\bwhsec_[A-Za-z0-9]{24,}")),
    Rule(
        "google-key", re.compile(r"\bAIza[0-9A-Za-z_\-]{35}|\bya29\.[0-9A-Za-z_\-]{20,}|\bGOCSPX-[0-9A-Za-z_\-]{20,}")
    ),
    Rule("jwt", re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*")),
    # Headers: keep the name (and the scheme word, if any), drop the credential up to the end of the header value.
    Rule(
        "authorization",
        re.compile(
            r"((?:proxy-)?authorization(?:\\?[\"'])?\s*:\s*(?:\\?[\"'])?(?:(?:bearer|basic|token|digest|bot)\s+)?)"
            r"(?!\[REDACTED)[^\s\"'\\]+",
            re.I,
        ),
        keep=1,
    ),
    # A bearer token outside an Authorization header (``curl -H "Bearer …"`` split by quoting, a log line).
    Rule("bearer-token", re.compile(r"(\bbearer\s+)(?!\[REDACTED)[A-Za-z0-9._~+/=-]{16,}", re.I), keep=1),
    Rule(
        "cookie",
        re.compile(r"((?:set-)?cookie(?:\\?[\"'])?\s*:\s*(?:\\?[\"'])?)(?!\[REDACTED)[^\"'\\\r\n]+", re.I),
        keep=1,
    ),
    # NAME_KEY=value, "db_password": "...", api_token: 8f3a... — the name is kept, the value goes. A reference to
    # another variable ($X, ${X}) is not a secret and stays. The name is word characters only: with '-' or '.' in
    # it, text like "x-x-x-..." would make the match quadratic.
    Rule(
        "assignment",
        re.compile(
            r"(\b" + _NAME + r"(?:\\?[\"'])?\s*(?:=\s*(?:\\?[\"'])?|:\s*\\?[\"']))"
            r"(?![$%{]|\[REDACTED)" + _NOT_CALL + _VAL + "+",
            re.I,
        ),
        keep=1,
    ),
    # An unquoted "name: value" is as often code as config (``refresh_token: str`` in a Python signature), so there
    # the value must look like a secret: 8+ characters with a digit, or 16+.
    Rule(
        "assignment",
        re.compile(
            r"(\b" + _NAME + r"\s*:\s+)(?![$%{]|\[REDACTED)"
            r"(?:(?=" + _VAL + r"*\d)" + _VAL + r"{8,}|" + _VAL + r"{16,})",
            re.I,
        ),
        keep=1,
    ),
)


# detect-secrets (Yelp's maintained detector set) knows more token formats than the list above, and learns new ones
# in its releases: every plugin whose patterns match the secret itself is used, as is. Its keyword, entropy and
# private-key plugins judge whole lines and files, not spans of text to cut out, so the rules above do those jobs; so
# do ours for OpenAI keys and JWTs, whose detect-secrets patterns backtrack quadratically on text like "sk-sk-sk-…".
# ``group``: the pattern's group that is the secret (None: the whole match).
_DETECT_SECRETS: tuple[tuple[str, str, str, int | None], ...] = (
    ("aws", "AWSKeyDetector", "aws-key", None),
    ("azure_storage_key", "AzureStorageKeyDetector", "azure-key", None),
    ("basic_auth", "BasicAuthDetector", "url-password", 1),
    ("discord", "DiscordBotTokenDetector", "discord-token", None),
    ("github_token", "GitHubTokenDetector", "github-token", None),
    ("gitlab_token", "GitLabTokenDetector", "gitlab-token", None),
    ("mailchimp", "MailchimpDetector", "mailchimp-key", None),
    ("npm", "NpmDetector", "npm-token", 1),
    ("pypi_token", "PypiTokenDetector", "pypi-token", None),
    ("sendgrid", "SendGridDetector", "sendgrid-key", None),
    ("slack", "SlackDetector", "slack-token", None),
    ("square_oauth", "SquareOAuthDetector", "square-key", None),
    ("stripe", "StripeDetector", "stripe-key", None),
    ("telegram_token", "TelegramBotTokenDetector", "telegram-token", None),
    ("twilio", "TwilioKeyDetector", "twilio-key", None),
)


@lru_cache(maxsize=1)
def _detect_secrets_rules() -> tuple[Rule, ...]:
    """Rules from detect-secrets' plugins (a pinned dependency); none if it cannot be imported. Built on first use
    (``DETECT_SECRETS_RULES``): importing detect-secrets (it brings ``requests``) costs ~0.1 s, which a process that
    only checks whether a report is current (an unchanged ``analyze``) need not pay."""
    import importlib

    rules: list[Rule] = []
    for module, cls, family, group in _DETECT_SECRETS:
        try:
            plugin = getattr(importlib.import_module(f"detect_secrets.plugins.{module}"), cls)
        except (ImportError, AttributeError):
            continue
        for pattern in plugin.denylist:
            if group is not None and pattern.groups < group:
                continue
            # A pattern with groups of its own but none named as the secret: the whole match is the secret.
            rules.append(Rule(family, pattern, only=group))
    return tuple(rules)


def __getattr__(name: str) -> object:
    if name == "DETECT_SECRETS_RULES":  # built on first use (``_detect_secrets_rules``)
        return _detect_secrets_rules()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _sub_group(rule: Rule, marker: str, text: str) -> str:
    g = rule.only or 0

    def repl(m: re.Match[str]) -> str:
        whole, start, end = m.group(0), m.start(g) - m.start(), m.end(g) - m.start()
        if start < 0 or m.group(g).startswith("[REDACTED") or "[REDACTED" in m.group(g):
            return whole
        return whole[:start] + marker + whole[end:]

    return rule.pattern.sub(repl, text)


LOOKS_SECRET = re.compile(
    # Words and prefixes, matched in casefolded text: at least one is in every text a rule below matches.
    r"private key|sk-|sk_|rk_|whsec_|akia|asia|abia|acca|agpa|aida|aroa|anpa|anva|aipa|a3t|gh[pousr]_|github_pat_"
    r"|xox|xapp-|hooks\.slack\.com|aiza|ya29\.|gocspx-|eyj|authoriz|bearer|cookie|key|token|secret|passw|pwd|aws"
    r"|://|gl[a-z]{2,6}-|gr1348941|-us\d|pypi-|sg\.|sq0csp-"
    # Shapes without a fixed word: Telegram bot tokens, Twilio keys, Discord tokens.
    r"|\d:[\w-]{35}|(?:ac|sk)[a-z0-9]{32}|\.[\w-]{6}\.(?<=[\w-]{23}\.[\w-]{6}\.)"
)
"""The pre-filter, one pattern over the casefolded text (casefolding as the rules' IGNORECASE does, so ``ſ`` and
``K`` count): a text it finds nothing in holds nothing a rule would replace and skips the rules, which is most
texts. Every rule added above or taken from detect-secrets needs its word or shape here
(tests/test_redact.py checks each family's examples)."""


NEEDLES: dict[str, tuple[str, ...]] = {
    "private-key": ("private key",),
    "anthropic-key": ("sk-ant-",),
    "openai-key": ("sk-",),
    "aws-key": ("akia", "asia", "abia", "acca", "agpa", "aida", "aroa", "anpa", "anva", "aipa", "a3t", "aws"),
    "github-token": ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    "slack-token": ("xox", "xapp-", "hooks.slack.com"),
    "stripe-key": ("sk_", "rk_", "whsec_"),
    "google-key": ("aiza", "ya29.", "gocspx-"),
    "jwt": ("eyj",),
    "authorization": ("authorization",),
    "bearer-token": ("bearer",),
    "cookie": ("cookie",),
    "assignment": ("key", "token", "secret", "passw", "pwd"),
    "azure-key": ("accountkey=",),
    "url-password": ("://",),
    "discord-token": (".",),
    "gitlab-token": ("gl", "gr1348941"),
    "mailchimp-key": ("-us",),
    "npm-token": ("_authtoken",),
    "pypi-token": ("pypi-",),
    "sendgrid-key": ("sg.",),
    "square-key": ("sq0csp-",),
    "telegram-token": (":",),
    "twilio-key": ("ac", "sk"),
}
"""For each family, strings one of which (casefolded) is in every text its rules match: a text that passed the
pre-filter still skips the rules whose strings it lacks (a plain substring test, far cheaper than a regex pass). A
family missing here is always run."""


def redact(text: str | None) -> str | None:
    """``text`` with every secret replaced by a marker naming its family."""
    if not text:
        return text
    return _redacted(text)


@lru_cache(maxsize=CACHED_TEXTS)
def _redacted(text: str) -> str:
    """``redact`` of a non-empty text. Cached: a loop shows the same command, result or sentence again and again
    (of the 40k texts the benchmark's first 300 session pages redact, 15k are distinct)."""
    folded = text.casefold()
    if LOOKS_SECRET.search(folded) is None:
        return text
    for rule in RULES + _detect_secrets_rules():
        needles = NEEDLES.get(rule.family)
        if needles is not None and not any(n in folded for n in needles):
            continue
        before = text
        marker = MARK.format(rule.family)
        if rule.only is not None:
            text = _sub_group(rule, marker, text)
        elif rule.keep is None:
            text = rule.pattern.sub(marker, text)
        else:
            text = rule.pattern.sub(lambda m, k=rule.keep, mk=marker: m.group(k) + mk, text)
        if text is not before and text != before:
            folded = text.casefold()  # later rules test what this one left
    return text


def has_secret(text: str | None) -> bool:
    """Whether ``redact`` would change ``text``."""
    return bool(text) and redact(text) != text


MARGIN = 1024
"""Characters past the shown part that are redacted with it: a secret that the edge of the shown part cuts is
still recognised whole, as long as it is shorter than this (a PEM key is recognised from its first line)."""


def redact_window(
    text: str | None,
    show: int,
    margin: int = MARGIN,
    complete: bool = True,
    redactor: Callable[[str | None], str | None] | None = None,
) -> tuple[str, int]:
    """``text`` redacted far enough that its first ``show`` characters are final, and how many characters of
    ``text`` that took: only the shown part and a margin are redacted, not the whole text (a 60 kB result shown as
    4,000 characters costs 5 kB of redaction).

    Markers are shorter than most secrets, so redaction can pull text from past the margin into view: the window
    grows until the redacted text is ``show + margin`` long or holds all of ``text``. ``complete=False`` says
    ``text`` is itself a clipped copy; its end is then a cut too, and the last ``margin`` characters are dropped
    when they could reach the shown part. ``redactor`` defaults to ``redact``."""
    if not text:
        return "", 0
    fn = redactor or redact
    want = show + margin
    end = want
    while True:
        out = fn(text[:end]) or ""
        if end >= len(text):
            if not complete and len(out) < want:
                out = out[: max(0, len(out) - margin)]
            return out, len(text)
        if len(out) >= want:
            return out, end
        end += want - len(out) + margin


def redact_cut(text: str | None, limit: int) -> str | None:
    """``text`` redacted, then cut to ``limit`` characters: cutting first would leave part of a secret that no rule
    recognises any more (18 characters of a 20-character key)."""
    if text is None:
        return None
    out, _ = redact_window(text, limit)
    if len(out) <= limit:
        return out
    return out[:limit]


MARKER = re.compile(r"\[REDACTED [a-z-]+\]")
"""A marker ``redact`` leaves behind; the templates highlight these."""


def identity(text: str | None) -> str | None:
    """The redactor used with ``--no-redact``."""
    return text
