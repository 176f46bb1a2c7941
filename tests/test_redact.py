"""Secret redaction: one test per family, in the shapes transcripts carry them (shell text, JSON-escaped arguments,
headers, env files), and text that must survive untouched."""

from __future__ import annotations

import time

import orjson
import pytest

from reports.redact import MARKER, redact

# Assembled from parts so that no secret scanner flags this file.
ANTHROPIC = "sk-ant-" + "api03-" + "abcDEF123_-" * 8
OPENAI_PROJECT = "sk-" + "proj-" + "A1b2C3d4E5" * 5
OPENAI_LEGACY = "sk-" + "a1B2c3D4e5F6g7H8i9J0" * 2 + "abcdefgh"
AWS_ID = "AKIA" + "Z7XJ4Q2M9KPL3WYV"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/" + "bPxRfiCYEXAMPLEKEY"
GITHUB_CLASSIC = "ghp_" + "16C7e42F292c6912E7710c838347Ae178B4a"
GITHUB_FINE = "github_pat_" + "11ABCDEFG0" + "abcdefghijklmnopqrstuvwxyz0123456789"
SLACK_BOT = "xoxb-" + "2401234567-" + "2401234567890-" + "aBcDeFgHiJkLmNoPqRsTuVwX"
SLACK_HOOK = "https://hooks.slack.com/services/" + "T00000000/B00000000/" + "XXXXXXXXXXXXXXXXXXXXXXXX"
STRIPE = "sk_" + "live_" + "51H8abcdefGHIJKLmnopQRstu"
STRIPE_RESTRICTED = "rk_" + "test_" + "51H8abcdefGHIJKLmnopQRstu"
GOOGLE = "AIza" + "SyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY"
GOOGLE_OAUTH = "ya29." + "a0AfH6SMBx3xQ7_abcdefghijklmnop"
JWT = (
    "eyJ"
    + "hbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
    + ".eyJ"
    + "zdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4ifQ"
    + ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
PEM = (
    "-----BEGIN " + "PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\n"
    "VJTUt9Us8cKjMzEfYyjiWA4R4/M2bS1GB4t7NXp98C3SC6dVMvDuictGeurT8jNbvJZHtCSuYEvu\n-----END PRIVATE KEY-----"
)


def assert_gone(secret: str, text: str, family: str) -> str:
    out = redact(text)
    assert out is not None
    assert secret not in out
    assert f"[REDACTED {family}]" in out
    return out


def json_args(obj: dict) -> str:
    """How a call's arguments sit in the store: canonical JSON, so quotes and newlines arrive escaped."""
    return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS).decode()


def test_anthropic_key_in_shell_and_json() -> None:
    assert_gone(ANTHROPIC, f"curl -H 'x-api-key: {ANTHROPIC}' https://api.anthropic.com", "anthropic-key")
    assert_gone(ANTHROPIC, json_args({"command": f'export ANTHROPIC_API_KEY="{ANTHROPIC}"'}), "anthropic-key")


def test_openai_keys_project_and_legacy() -> None:
    out = assert_gone(OPENAI_PROJECT, f"OpenAI(api_key='{OPENAI_PROJECT}')", "openai-key")
    assert out.startswith("OpenAI(api_key='")
    assert_gone(OPENAI_LEGACY, f"key is {OPENAI_LEGACY}.", "openai-key")


def test_aws_access_key_id_and_secret_assignment() -> None:
    assert_gone(AWS_ID, f"aws_access_key_id = {AWS_ID}", "aws-key")
    creds = f"[default]\naws_access_key_id = {AWS_ID}\naws_secret_access_key = {AWS_SECRET}\n"
    out = redact(creds)
    assert AWS_SECRET not in out and AWS_ID not in out
    assert "aws_secret_access_key = [REDACTED assignment]" in out


def test_github_tokens() -> None:
    assert_gone(GITHUB_CLASSIC, f"git clone https://{GITHUB_CLASSIC}@github.com/o/r.git", "github-token")
    assert_gone(GITHUB_FINE, f"GH token: {GITHUB_FINE}", "github-token")


def test_slack_tokens_and_webhooks() -> None:
    assert_gone(SLACK_BOT, f"client = WebClient(token={SLACK_BOT})", "slack-token")
    assert_gone(SLACK_HOOK, json_args({"url": SLACK_HOOK, "method": "POST"}), "slack-token")


def test_stripe_secret_and_restricted_keys() -> None:
    assert_gone(STRIPE, f"stripe.api_key = {STRIPE}", "stripe-key")
    assert_gone(STRIPE_RESTRICTED, f"restricted: {STRIPE_RESTRICTED}", "stripe-key")


def test_google_api_key_and_oauth_token() -> None:
    assert_gone(GOOGLE, f"https://maps.googleapis.com/api/geocode/json?key={GOOGLE}&address=x", "google-key")
    assert_gone(GOOGLE_OAUTH, f"access token {GOOGLE_OAUTH} expires", "google-key")


def test_jwt() -> None:
    out = assert_gone(JWT, f"session cookie value {JWT} (expired)", "jwt")
    assert out.endswith("(expired)")


def test_pem_private_key_raw_json_escaped_and_truncated() -> None:
    out = assert_gone(PEM, f"cat key.pem\n{PEM}\nexit 0", "private-key")
    assert out.endswith("exit 0")
    escaped = json_args({"content": PEM, "path": "key.pem"})
    out = assert_gone("MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7", escaped, "private-key")
    assert '"path":"key.pem"' in out
    clipped = PEM[:90]  # a result cut before the END line must not leak its body either
    assert_gone(clipped[40:], clipped, "private-key")


def test_authorization_headers_keep_the_scheme() -> None:
    token = "abc123" + "def456ghi789"
    out = assert_gone(token, f"curl -H 'Authorization: Bearer {token}' https://x", "authorization")
    assert "Authorization: Bearer [REDACTED authorization]" in out
    basic = "dXNlcjpwYXNz" + "d29yZA=="
    assert_gone(basic, json_args({"headers": {"Authorization": f"Basic {basic}"}}), "authorization")
    assert_gone(token, f"proxy-authorization: {token}\r\n", "authorization")


def test_cookie_headers() -> None:
    out = assert_gone("sessionid=", "Cookie: sessionid=38afes7a8; csrftoken=abc\nAccept: */*", "cookie")
    assert out.endswith("\nAccept: */*")
    assert_gone("id=a3fWa", "Set-Cookie: id=a3fWa; Expires=Thu, 21 Oct 2026 07:28:00 GMT", "cookie")


@pytest.mark.parametrize(
    "name", ["DATABASE_PASSWORD", "STRIPE_WEBHOOK_SECRET", "NPM_TOKEN", "MY_SERVICE_KEY", "db_password"]
)
def test_assignments(name: str) -> None:
    value = "s3cr3t" + "-value-42"
    for text in (
        f"{name}={value}",
        f"export {name}='{value}'",
        f'{name}: "{value}"',
        f"{name} = {value} # prod",
        json_args({"command": f'{name}="{value}" ./run.sh'}),
    ):
        out = assert_gone(value, text, "assignment")
        assert name in out  # the name stays: the reader sees what was there


def test_unquoted_colon_values_must_look_like_secrets() -> None:
    # Python signatures and type annotations are not config: found redacted in a real session page
    code = "def refresh(store: TokenStore, refresh_token: str) -> tuple[str, str]:\n    api_key: Optional[str] = None"
    assert redact(code) == code
    assert_gone("hunter2-prod", "db_password: hunter2-prod", "assignment")  # YAML: digits, 8+ characters
    assert_gone("correcthorsebatterystaple", "smtp_password: correcthorsebatterystaple", "assignment")  # 16+


def test_assignment_of_a_variable_reference_is_kept() -> None:
    text = "API_KEY=$OPENAI_KEY ./run && TOKEN_KEY=${SECRET} make"
    assert redact(text) == text


def test_ordinary_text_is_untouched() -> None:
    text = (
        "max_tokens=4096; sk-learn is a package; the key_id field; Authorization is required; "
        "AKIA is a prefix; eyJ is base64 for '{\"'; run `npm test` in /srv/app"
    )
    assert redact(text) == text
    assert redact("") == ""
    assert redact(None) is None


def test_markers_name_their_family() -> None:
    out = redact(f"{ANTHROPIC} {GITHUB_CLASSIC} NPM_TOKEN=abcdef123456")
    assert MARKER.findall(out) == ["[REDACTED anthropic-key]", "[REDACTED github-token]", "[REDACTED assignment]"]


def test_a_key_inside_an_assignment_is_redacted_once() -> None:
    out = redact(f"OPENAI_API_KEY={OPENAI_PROJECT}")
    assert out == "OPENAI_API_KEY=[REDACTED openai-key]"


@pytest.mark.parametrize(
    "unit,n",
    [
        ("x-", 1000),
        ("sk-", 750),
        ("a_", 1000),
        ("eyJ", 750),
        ("Authorization: ", 150),
        ("-----BEGIN PRIVATE KEY-----", 75),
    ],
)
def test_pathological_text_redacts_in_linear_time(unit: str, n: int) -> None:
    """Every shown text passes through redact: a regex that backtracks quadratically would stall a large report. Eight
    times the text must cost about eight times as much, not sixty-four (a ratio, so a loaded machine does not fail
    it; a quadratic pattern once took 0.35 s on 8,000 characters)."""

    def best(text: str) -> float:
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            redact(text)
            times.append(time.perf_counter() - t0)
        return min(times)

    small, large = best(unit * n), best(unit * n * 8)
    assert large < max(small, 1e-4) * 24


# ---- redacting only what is shown (issue 13) ----------------------------------------------------------------------

DETECT_SECRETS_SAMPLES = [
    "AccountKey=" + "a1B2" * 22,
    "https://admin:" + "hunter2pass" + "@db.internal/x",
    "MTk4NjIyNDgzNDcxOTI1MjQ4" + ".Cl2FMQ." + "ZnCjm1XVW7vRze4b7Cq4se7kKWs",
    "glpat-" + "abcdefghij0123456789",
    "0123456789abcdef0123456789abcdef" + "-us12",
    "//registry.npmjs.org/:_authToken=" + "npm_" + "a" * 36,
    "SG." + "a" * 22 + "." + "b" * 43,
    "sq0csp-" + "c" * 43,
    "123456789:" + "A" * 35,
    "AC" + "a1" * 16,
    "SK" + "b2" * 16,
    "pypi-AgEIcHlwaS5vcmc" + "x" * 70,
]


@pytest.mark.parametrize(
    "text",
    [
        ANTHROPIC,
        OPENAI_PROJECT,
        OPENAI_LEGACY,
        AWS_ID,
        GITHUB_CLASSIC,
        GITHUB_FINE,
        SLACK_BOT,
        SLACK_HOOK,
        STRIPE,
        STRIPE_RESTRICTED,
        GOOGLE,
        GOOGLE_OAUTH,
        JWT,
        PEM,
        "Authorization: Bearer abc123def456ghi789jkl",
        "Cookie: sid=abcdef123456",
        "DB_PASSWORD=hunter2hunter2",
        *DETECT_SECRETS_SAMPLES,
    ],
)
def test_the_prefilter_lets_every_secret_family_through(text: str) -> None:
    """The one-pattern pre-filter lets a text skip every rule: it must find something in each family's secrets (a
    rule the pre-filter does not know would silently stop redacting)."""
    from reports.redact import LOOKS_SECRET

    assert LOOKS_SECRET.search(text.casefold()), text
    assert redact(text) != text, text


def test_text_with_nothing_secret_looking_skips_the_rules() -> None:
    from reports.redact import LOOKS_SECRET

    text = "def handler(event, context):\n    return process(event)\n" * 100
    assert LOOKS_SECRET.search(text.casefold()) is None
    assert redact(text) == text


@pytest.mark.parametrize("offset", [-30, -10, -1, 0, 5])
def test_a_secret_cut_by_the_window_edge_is_still_redacted(offset: int) -> None:
    """Only the shown part and a margin are redacted; a key that the cut at ``show`` splits is recognised whole and
    none of it reaches the shown part, wherever the edge falls inside it."""
    from reports.redact import redact_window

    show = 4000
    text = "x " * ((show + offset) // 2) + GITHUB_CLASSIC + " tail" + "y" * 20000
    out, used = redact_window(text, show)
    shown = out[:show]
    assert GITHUB_CLASSIC[:12] not in shown and "ghp_" not in shown
    assert used < len(text)  # the 20 kB after the window were not redacted


def test_markers_shorter_than_their_secrets_do_not_pull_unredacted_text_into_view() -> None:
    """Many long secrets shrink to short markers: the window grows so that text from beyond the margin, where a cut
    could split a key, never slides into the shown part unredacted."""
    from reports.redact import MARGIN, redact_window

    show = 300
    pem_block = PEM + "\n"
    text = pem_block * ((show + MARGIN) // len(pem_block) + 2) + GITHUB_CLASSIC + " " + "z" * 5000
    out, _ = redact_window(text, show)
    assert "ghp_" not in out[:show] and "MIIEv" not in out[:show]


def test_a_clipped_copy_drops_its_cut_end_rather_than_show_it() -> None:
    from reports.redact import redact_window

    text = "a " * 100 + GITHUB_CLASSIC[:20]  # the store clipped this copy inside the key
    out, _ = redact_window(text, 4000, complete=False)
    assert "ghp_" not in out


def test_every_rule_family_says_which_strings_it_needs() -> None:
    """A family without needles is run on every text that passes the pre-filter: correct, but the cost this skip
    saves comes back silently. Each rule's family is listed."""
    from reports.redact import DETECT_SECRETS_RULES, NEEDLES, RULES

    assert {r.family for r in RULES + DETECT_SECRETS_RULES} <= set(NEEDLES)
