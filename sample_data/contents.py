"""File texts and tool outputs the sample scenarios quote (and the benchmark corpus reuses): realistic content,
kept apart so the scenarios in make_samples.py read as stories."""

CART_TS = """import type { CartLine, Cart } from "./types";

export function addLine(cart: Cart, line: CartLine): Cart {
  const existing = cart.lines.find((l) => l.sku === line.sku);
  if (existing) {
    return { ...cart, lines: cart.lines.map((l) => (l.sku === line.sku ? { ...l, quantity: l.quantity + 1 } : l)) };
  }
  return { ...cart, lines: [...cart.lines, line] };
}

export function cartSubtotal(cart: Cart): number {
  return cart.lines.reduce((sum, line) => sum + line.price * line.qty, 0);
}
"""

TSC_3 = """
> webshop@1.14.0 build
> tsc -p tsconfig.build.json && vite build

src/cart/cart.ts(12,61): error TS2339: Property 'qty' does not exist on type 'CartLine'.
src/cart/totals.ts(8,34): error TS2339: Property 'qty' does not exist on type 'CartLine'.
src/checkout/Summary.tsx(21,27): error TS2551: Property 'lineCount' does not exist on type 'Cart'. Did you mean 'lines'?

Found 3 errors in 3 files.

Errors  Files
     1  src/cart/cart.ts:12
     1  src/cart/totals.ts:8
     1  src/checkout/Summary.tsx:21
"""
TSC_2 = """
> webshop@1.14.0 build
> tsc -p tsconfig.build.json && vite build

src/cart/totals.ts(8,34): error TS2339: Property 'qty' does not exist on type 'CartLine'.
src/checkout/Summary.tsx(21,27): error TS2551: Property 'lineCount' does not exist on type 'Cart'. Did you mean 'lines'?

Found 2 errors in 2 files.
"""
TSC_1 = """
> webshop@1.14.0 build
> tsc -p tsconfig.build.json && vite build

src/checkout/Summary.tsx(21,27): error TS2551: Property 'lineCount' does not exist on type 'Cart'. Did you mean 'lines'?

Found 1 error in src/checkout/Summary.tsx:21
"""
VITE_OK = """
> webshop@1.14.0 build
> tsc -p tsconfig.build.json && vite build

vite v5.4.11 building for production...
transforming...
\u2713 412 modules transformed.
rendering chunks...
computing gzip size...
dist/index.html                   0.62 kB \u2502 gzip:  0.38 kB
dist/assets/index-DkT0sVb1.css   18.40 kB \u2502 gzip:  4.71 kB
dist/assets/index-C9xq2mPL.js   246.93 kB \u2502 gzip: 79.02 kB
\u2713 built in 3.84s
"""
JEST_ALL = """
> webshop@1.14.0 test
> vitest run

 \u2713 src/cart/cart.test.ts (9 tests) 14ms
 \u2713 src/cart/totals.test.ts (6 tests) 9ms
 \u2713 src/checkout/Summary.test.tsx (4 tests) 61ms
 \u2713 src/lib/money.test.ts (11 tests) 5ms

 Test Files  4 passed (4)
      Tests  30 passed (30)
   Start at  09:31:12
   Duration  1.42s (transform 311ms, setup 0ms, collect 902ms, tests 89ms, environment 388ms, prepare 402ms)
"""
CHECKOUT_FAIL = """
> webshop@1.14.0 test
> vitest run checkout

 \u276f src/checkout/checkout.int.test.ts (5 tests | 5 failed) 3012ms
   \u00d7 checkout > creates an order from a cart 612ms
     \u2192 connect ECONNREFUSED 127.0.0.1:5432
   \u00d7 checkout > applies a coupon 601ms
     \u2192 connect ECONNREFUSED 127.0.0.1:5432
   \u00d7 checkout > rejects an expired coupon 598ms
     \u2192 connect ECONNREFUSED 127.0.0.1:5432
   \u00d7 checkout > reserves stock 600ms
     \u2192 connect ECONNREFUSED 127.0.0.1:5432
   \u00d7 checkout > releases stock on cancel 601ms
     \u2192 connect ECONNREFUSED 127.0.0.1:5432

 Test Files  1 failed (1)
      Tests  5 failed (5)
"""
CHECKOUT_PASS = """
> webshop@1.14.0 test
> vitest run checkout

 \u2713 src/checkout/checkout.int.test.ts (5 tests) 1180ms

 Test Files  1 passed (1)
      Tests  5 passed (5)
"""
E2E_SMOKE = """
> webshop@1.14.0 test:e2e
> playwright test --grep smoke

Running 3 tests using 3 workers

  \u2713  1 [chromium] \u203a smoke.spec.ts:4:5 \u203a home page renders (1.2s)
  \u2713  2 [chromium] \u203a smoke.spec.ts:11:5 \u203a add to cart (2.0s)
  \u2713  3 [chromium] \u203a smoke.spec.ts:23:5 \u203a checkout page loads (1.7s)

  3 passed (4.6s)
"""
TOTALS_TS = """import type { Cart, Customer } from "./types";
import { cartSubtotal } from "./cart";

const SHIPPING_FREE_FROM = 50;

export function shipping(cart: Cart): number {
  return cartSubtotal(cart) >= SHIPPING_FREE_FROM ? 0 : 4.9;
}

export function orderTotal(cart: Cart, customer: Customer): number {
  const items = cartSubtotal(cart);
  return Math.round((items + shipping(cart)) * 100) / 100;
}
"""
RG_DISCOUNT = """src/cart/types.ts:18:  discountCode?: string;
src/cart/coupons.ts:4:export function couponDiscount(code: string, amount: number): number {
src/cart/coupons.ts:11:  return discount;"""
CURL_ERR = "curl: (7) Failed to connect to staging-api.internal port 8080 after 2 ms: Couldn't connect to server"
DEPLOY_OUT = """helm upgrade --install api charts/api -n staging -f envs/staging/values.yaml --wait=false
Release "api" has been upgraded. Happy Helming!
NAME: api
LAST DEPLOYED: Wed Mar  4 10:31:58 2026
NAMESPACE: staging
STATUS: deployed
REVISION: 42
helm upgrade --install worker charts/worker -n staging -f envs/staging/values.yaml --wait=false
Release "worker" has been upgraded. Happy Helming!
REVISION: 17"""
API_LOGS = """2026-03-04T10:32:03.114Z INFO  starting api v2.7.3 (commit 9f1c2ab)
2026-03-04T10:32:03.120Z INFO  loading config from /etc/api/config.yaml
2026-03-04T10:32:03.121Z FATAL config: missing required env DATABASE_URL
2026-03-04T10:32:03.121Z INFO  exiting with status 78"""
DEPLOY_YAML = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: api
  namespace: staging
spec:
  replicas: 2
  template:
    spec:
      containers:
        - name: api
          image: registry.internal/api:2.7.3
          ports:
            - containerPort: 8080
          env:
            - name: LOG_LEVEL
              value: info
"""
SETTINGS = {
    "services/invoicing/settings.py": "from billing.config import load_legacy\n\n"
    'LEGACY = load_legacy("config/legacy.yaml")\n'
    'INVOICE_PREFIX = LEGACY.get("invoice_prefix", "INV")\nNET_DAYS = 30\n',
    "services/dunning/settings.py": "from billing.config import load_legacy\n\nRETRY_SCHEDULE = load_legacy("
    '"config/legacy.yaml")["dunning"]["retries"]\n',
    "services/webhooks/settings.py": 'import os\n\nSIGNING_SECRET = os.environ["WEBHOOK_SIGNING_SECRET"]\n'
    "MAX_ATTEMPTS = 8\n",
}
LEGACY_YAML = """# DEPRECATED: values moved to settings.toml (BILL-2231)
invoice_prefix: INV
dunning:
  retries: [1, 3, 7, 14]
tax:
  default_rate: 0.19
"""
SIDEBARS_JS = """// @ts-check
/** @type {import('@docusaurus/plugin-content-docs').SidebarsConfig} */
const sidebars = {
  docs: [
    'intro',
    { type: 'category', label: 'Guides', items: ['guides/quickstart', 'guides/webhooks', 'guides/testing'] },
    { type: 'category', label: 'API', items: ['api/intro', 'api/authentication'] },
  ],
};

module.exports = sidebars;
"""
SIDEBARS_NEW = SIDEBARS_JS.replace(
    "items: ['api/intro', 'api/authentication']",
    "items: ['api/intro', 'api/authentication', 'api/pagination', 'api/errors', 'api/rate-limits', 'api/webhooks']",
)
DOCS_CONF = """// @ts-check
const config = {
  title: 'Acme Billing Docs',
  url: 'https://docs.acme.test',
  baseUrl: '/',
  onBrokenLinks: 'throw',
  presets: [['classic', { docs: { sidebarPath: require.resolve('./sidebars.js') } }]],
};
module.exports = config;"""
SESSION_PY = '''"""Session tokens: issue, refresh, revoke."""
from datetime import datetime, timedelta, timezone

from billing.auth.store import TokenStore

REFRESH_TTL = timedelta(days=14)


def refresh(store: TokenStore, refresh_token: str) -> tuple[str, str]:
    record = store.get(refresh_token)
    if record is None or record.expires_at < datetime.now(timezone.utc):
        raise PermissionError("refresh token expired")
    access = store.issue_access(record.user_id)
    return access, refresh_token
'''
PYTEST_FAIL = """F                                                                        [100%]
=================================== FAILURES ===================================
_________________________ test_refresh_rotates_token __________________________

    def test_refresh_rotates_token(store):
        access, new_refresh = refresh(store, "r-1")
>       assert new_refresh != "r-1"
E       AssertionError: assert 'r-1' != 'r-1'

tests/test_session.py:31: AssertionError
=========================== short test summary info ============================
FAILED tests/test_session.py::test_refresh_rotates_token - AssertionError: assert 'r-1' != 'r-1'
1 failed, 6 passed in 0.38s"""
CONFTEST = """import pytest

from billing.auth.memory import InMemoryTokenStore


@pytest.fixture
def store():
    s = InMemoryTokenStore(rotate=False)
    s.seed_refresh("r-1", user_id=7)
    return s
"""
PRORATION_PY = '''from decimal import ROUND_HALF_EVEN, Decimal


def credit_for_unused(old_price: Decimal, days_left: int, period_days: int) -> Decimal:
    """Credit for the unused part of the current period, rounded half-even to cents."""
    return (old_price * days_left / period_days).quantize(Decimal("0.01"), ROUND_HALF_EVEN)


def prorate_upgrade(old_price: Decimal, new_price: Decimal, days_left: int, period_days: int) -> Decimal:
    """Amount due now when a customer upgrades mid-cycle: new plan for the rest of the period minus the credit."""
    charge = (new_price * days_left / period_days).quantize(Decimal("0.01"), ROUND_HALF_EVEN)
    return charge - credit_for_unused(old_price, days_left, period_days)
'''
INVOICES_PY = """from billing.proration import prorate_upgrade


def upgrade_invoice(sub, new_plan, today):
    days_left = (sub.period_end - today).days
    amount = prorate_upgrade(sub.plan.price, new_plan.price, days_left, sub.period_days)
    return Invoice(customer=sub.customer, lines=[Line("Upgrade to " + new_plan.name, amount)])


def line_total(qty, unit_price):
    total = qty*unit_price
    return round(total, 2)
"""
REPORT = """Proration lives in `src/billing/proration.py`:

- `prorate_upgrade(old_price, new_price, days_left, period_days)` charges the new plan for the remaining days and
  subtracts `credit_for_unused(...)`, the unused share of the old plan. Both round half-even to cents.
- It is called from `upgrade_invoice()` in `src/billing/invoices.py`, which computes `days_left` from
  `sub.period_end - today` and emits a single invoice line "Upgrade to <plan>".
- Tests: `tests/test_proration.py` (8 cases, including the leap-day period)."""
SDK_CLIENT_JS = """\"use strict\";
Object.defineProperty(exports, "__esModule", { value: true });
exports.PaymentClient = void 0;
const errors_1 = require("./errors");
class PaymentClient {
    constructor(opts) {
        this.baseUrl = opts.baseUrl ?? "https://api.acmepay.test/v2";
        this.timeoutMs = opts.timeoutMs ?? 8000;
    }
    async charge(req) {
        const ctrl = new AbortController();
        const timer = setTimeout(() => ctrl.abort(), this.timeoutMs);
        try {
            const res = await fetch(`${this.baseUrl}/charges`, { method: "POST", body: JSON.stringify(req), signal: ctrl.signal });
            return await res.json();
        }
        catch (e) {
            if (e.name === "AbortError")
                throw new errors_1.PaymentError("PAYMENT_TIMEOUT", `gateway did not answer within ${this.timeoutMs} ms`);
            throw e;
        }
        finally {
            clearTimeout(timer);
        }
    }
}
exports.PaymentClient = PaymentClient;
"""  # noqa: E501 (file content of a sample session, byte for byte)
GH_VIEW = """{mark} main Release \u00b7 13877216420
Triggered via workflow_dispatch about {ago} ago

JOBS
{jobs}

For more information about a job, try: gh run view --job=<job-id>"""
GH_POLLS = [
    ("*", "1 minute", "* build (ID 38902211470)\n- test (ID 38902211502)\n- publish (ID 38902211533)"),
    ("*", "2 minutes", "\u2713 build in 1m38s (ID 38902211470)\n* test (ID 38902211502)\n- publish (ID 38902211533)"),
    (
        "*",
        "3 minutes",
        "\u2713 build in 1m38s (ID 38902211470)\n* test (ID 38902211502)  14/31 steps\n- publish (ID 38902211533)",
    ),
    (
        "*",
        "4 minutes",
        "\u2713 build in 1m38s (ID 38902211470)\n\u2713 test in 2m51s (ID 38902211502)\n* publish (ID 38902211533)",
    ),
    (
        "\u2713",
        "5 minutes",
        "\u2713 build in 1m38s (ID 38902211470)\n\u2713 test in 2m51s (ID 38902211502)\n"
        "\u2713 publish in 44s (ID 38902211533)",
    ),
]
RUFF_FAIL = """src/billing/invoices.py:11:16: E225 Missing whitespace around operator
   |
10 | def line_total(qty, unit_price):
11 |     total = qty*unit_price
   |                ^ E225
12 |     return round(total, 2)
   |
src/billing/invoices.py:7:12: F821 Undefined name `Invoice`
Found 2 errors."""
TF_ERR = """\u2577
\u2502 Error: No value for required variable
\u2502
\u2502   on variables.tf line 14:
\u2502   14: variable "db_password_secret_arn" {
\u2502
\u2502 The root module input variable "db_password_secret_arn" is not set, and has no default value. Use a -var or
\u2502 -var-file command line argument to provide a value for this variable.
\u2575"""
TF_VARS = """variable "region" {
  type    = string
  default = "eu-central-1"
}

variable "environment" {
  type    = string
  default = "staging"
}

variable "db_password_secret_arn" {
  type        = string
  description = "ARN of the Secrets Manager secret holding the DB password"
}
"""
TF_OK = """  # aws_db_instance.main will be updated in-place
  ~ resource "aws_db_instance" "main" {
      ~ manage_master_user_password = false -> true
    }

Plan: 0 to add, 1 to change, 0 to destroy."""
SUMMARY_TSX = """import { useCart } from "../cart/useCart";

export function Summary() {
  const { cart, total } = useCart();
  return (
    <aside className="summary">
      <p>{cart.lines.length} items</p>
      <p className="total">\u20ac{total.toFixed(2)}</p>
    </aside>
  );
}
"""
FORMAT_PRICE = """export function formatPrice(amount: number, locale = "en-IE", currency = "EUR"): string {
  return new Intl.NumberFormat(locale, { style: "currency", currency }).format(amount);
}
"""
FORMAT_PRICE_TEST = """import { describe, expect, it } from "vitest";
import { formatPrice } from "./formatPrice";

describe("formatPrice", () => {
  it("uses the German grouping for de-DE", () => {
    expect(formatPrice(1234.5, "de-DE")).toBe("1.234,50\u00a0\u20ac");
  });
  it("defaults to euros", () => {
    expect(formatPrice(3)).toBe("\u20ac3.00");
  });
});
"""
VITEST_FAIL = """ \u276f src/lib/formatPrice.test.ts (2 tests | 1 failed) 6ms
   \u00d7 formatPrice > defaults to euros 3ms
     \u2192 expected '\u20ac3.00' to be '\u20ac3.00' // Object.is equality (U+00A0 vs U+0020 in currency spacing)

 Test Files  1 failed (1)
      Tests  1 failed | 1 passed (2)"""
VITEST_PASS = """ \u2713 src/lib/formatPrice.test.ts (2 tests) 4ms

 Test Files  1 passed (1)
      Tests  2 passed (2)"""
PAGINATION_PY = '''def paginate(items, page, per_page=20):
    """Return one page of items; pages start at 1."""
    start = page * per_page
    return items[start:start + per_page]
'''
README_MD = """# acme-api

## Install

    pip install -r requirements.txt
    python manage.py migrate
"""
DOCKERFILE = """FROM python:3.12-slim
WORKDIR /app
COPY pyproject.toml uv.lock ./
RUN pip install uv && uv sync --frozen
COPY . .
CMD ["uv", "run", "gunicorn", "acme.wsgi"]
"""


# --- SWE-agent (EnIGMA) CTF: repeating-key XOR ------------------------------------------------------------------------

CTF_LS = """total 20
drwxr-xr-x 2 root root 4096 Mar 10 08:00 .
drwxr-xr-x 1 root root 4096 Mar 10 08:00 ..
-rw-r--r-- 1 root root  212 Mar 10 08:00 challenge.txt
-rw-r--r-- 1 root root  301 Mar 10 08:00 encrypt.py"""
CTF_CHALLENGE = """We intercepted this message. Whoever sent it XORed it with a short key they reuse everywhere.

ciphertext (hex): 0d0a05031c190a1d0b0c3e051113101b07001f3e1e0d1e3b1a0c3a0b0b1b08"""
CTF_ENCRYPT = """import sys
from itertools import cycle

KEY = open("key.txt", "rb").read().strip()


def xor(data: bytes, key: bytes) -> bytes:
    return bytes(a ^ b for a, b in zip(data, cycle(key)))


if __name__ == "__main__":
    flag = sys.stdin.buffer.read().strip()
    print(xor(flag, KEY).hex())"""
CTF_KEY4 = "key (from the known prefix 'flag'): b'kfdd'\nflag{rEpeatiNg_kEy_xoR_iS_wEak}"
CTF_WRONG = "Wrong flag!"
CTF_KEY5 = (
    "key length 5: b'kfdd{' -> flag{ok}xEl{C_rqzh$hb\\x7fk^ldPeb\n"
    "key length 6: b'kfdd{\\x1e' -> flag{bsRe`kii~E_gv{Q\\x1a"
)

# --- mini-swe-agent: ISO week parsing ---------------------------------------------------------------------------------

MINI_LS = "__init__.py\nformats.py\nparser.py\ntz.py"
MINI_FORMATS_PY = '''"""strftime patterns the parser tries, most specific first."""

ISO_WEEK = "%Y-W%W-%u"
ISO_DATE = "%Y-%m-%d"
PATTERNS = (ISO_WEEK, ISO_DATE, "%d/%m/%Y")


def week_pattern() -> str:
    return ISO_WEEK'''
MINI_TEST_FAIL = """F...                                                                     [100%]
=================================== FAILURES ===================================
__________________________ test_iso_week_2026_w01 ___________________________

    def test_iso_week_2026_w01():
>       assert parse("2026-W01-1") == date(2025, 12, 29)
E       AssertionError: assert datetime.date(2026, 1, 5) == datetime.date(2025, 12, 29)

tests/test_formats.py:14: AssertionError
=========================== short test summary info ============================
FAILED tests/test_formats.py::test_iso_week_2026_w01 - AssertionError: assert...
1 failed, 3 passed in 0.04s"""
MINI_TEST_PASS = "....                                                                     [100%]\n4 passed in 0.03s"
MINI_ALL_PASS = """........................................................................ [ 76%]
......................                                                   [100%]
94 passed in 0.61s"""
MINI_DIFF = """diff --git a/src/dateparse/formats.py b/src/dateparse/formats.py
index 4be0d1c..9f3a7e2 100644
--- a/src/dateparse/formats.py
+++ b/src/dateparse/formats.py
@@ -1,6 +1,6 @@
 \"\"\"strftime patterns the parser tries, most specific first.\"\"\"

-ISO_WEEK = "%Y-W%W-%u"
+ISO_WEEK = "%G-W%V-%u"
 ISO_DATE = "%Y-%m-%d"
 PATTERNS = (ISO_WEEK, ISO_DATE, "%d/%m/%Y")
"""

# --- OpenHands: coupon expiry -----------------------------------------------------------------------------------------

OH_LS = "applyCoupon.ts\nexpiry.test.ts\nexpiry.ts\nindex.ts\ntypes.ts"
OH_GREP = """src/coupons/applyCoupon.ts:3:import { isExpired } from "./expiry";
src/coupons/applyCoupon.ts:12:  if (isExpired(coupon, now)) {
src/coupons/expiry.ts:3:export function isExpired(coupon: Coupon, now: Date = new Date()): boolean {
src/coupons/expiry.test.ts:2:import { isExpired } from "./expiry";"""
OH_TEST_FAIL = """ RUN  v2.1.8 /workspace/webshop

 \u276f src/coupons/expiry.test.ts (3 tests | 1 failed) 7ms
   \u00d7 isExpired > a coupon expiring today is still valid
     \u2192 expected true to be false

 Test Files  1 failed (1)
      Tests  1 failed | 2 passed (3)"""
OH_EXPIRY_TS = """import type { Coupon } from "./types";

export function isExpired(coupon: Coupon, now: Date = new Date()): boolean {
  return coupon.expiresAt <= now;
}"""
OH_TEST_PASS = """ RUN  v2.1.8 /workspace/webshop

 \u2713 src/coupons/expiry.test.ts (3 tests) 5ms
 \u2713 src/coupons/applyCoupon.test.ts (6 tests) 9ms

 Test Files  2 passed (2)
      Tests  9 passed (9)"""

# --- Inspect: a service's port ----------------------------------------------------------------------------------------

IN_APP_LS = "README.md\nconfig\nlogs\nrun.sh"
IN_SERVER_TOML = """[server]
host = "0.0.0.0"
port = 8443
workers = 4

[tls]
cert = "/etc/app/tls/cert.pem"
key = "/etc/app/tls/key.pem\""""
IN_RUN_SH = '12:exec ./app --config config/server.toml --port "${PORT:-8443}"'
IN_LOG = """2026-03-11T09:58:01Z INFO  loading config/server.toml
2026-03-11T09:58:01Z INFO  tls enabled (cert /etc/app/tls/cert.pem)
2026-03-11T09:58:02Z INFO  listening on 0.0.0.0:8443"""
IN_CRON = "0 3 * * * /srv/backup/run.sh --target s3://acme-backups/nightly >> /var/log/backup.log 2>&1"
IN_BACKUP_LOG = """2026-03-10T03:00:02Z backup started
2026-03-10T03:04:47Z uploaded 1.9 GiB to s3://acme-backups/nightly/2026-03-10.tar.zst
2026-03-10T03:04:48Z backup finished (exit 0)"""

# --- Gemini CLI: reviewing the guides ---------------------------------------------------------------------------------

GUIDES_LS = "configure.md\ndeploy.md\ninstall.md\nupgrade.md"
GUIDE_INSTALL = """# Installing Tidepool

Tidepool runs on Linux and macOS. You need Python 3.10 or newer.

    pip install tidepool==0.14.2

Check the install with `tidepool --version`."""
GUIDE_CONFIGURE = """# Configuring Tidepool

Tidepool reads `tidepool.toml` from the working directory, then `~/.config/tidepool/config.toml`.

| key | default |
|---|---|
| `workers` | number of CPUs |
| `cache_dir` | `~/.cache/tidepool` |"""
GUIDE_DEPLOY = """# Deploying Tidepool

Build the image with `docker build -t tidepool .` and run it with `--env-file prod.env`.
The container listens on port 7070."""
GUIDE_UPGRADE = """# Upgrading

From 0.13 to 0.14: `cache_dir` moved from `[storage]` to the top level.

    pip install --upgrade tidepool==0.14.2"""
DOCS_BUILD = """> tidepool-docs@1.0.0 build
> mkdocs build --strict

INFO    -  Cleaning site directory
INFO    -  Building documentation to directory: /home/dana/src/docs-site/site
INFO    -  Documentation built in 0.84 seconds"""

# --- opencode: tax rounding -------------------------------------------------------------------------------------------

TAX_PY = """from decimal import ROUND_HALF_UP, Decimal

RATES = {"DE": Decimal("0.19"), "FR": Decimal("0.20"), "NL": Decimal("0.21")}


def tax_for(country: str, net: Decimal) -> Decimal:
    rate = RATES[country]
    return (net * rate).quantize(Decimal("0.1"), rounding=ROUND_HALF_UP)


def gross(country: str, net: Decimal) -> Decimal:
    return net + tax_for(country, net)"""
TAX_FAIL = """FFF.                                                                     [100%]
FAILED tests/test_tax.py::test_tax_rounds_to_cents - AssertionError: assert Decimal('3.8') == Decimal('3.80')
FAILED tests/test_tax.py::test_unknown_country_has_no_tax - KeyError: 'CH'
FAILED tests/test_tax.py::test_gross_keeps_two_places - AssertionError: assert Decimal('23.8') == Decimal('23.80')
3 failed, 1 passed in 0.05s"""
TAX_FAIL_2 = """.F..                                                                     [100%]
FAILED tests/test_tax.py::test_unknown_country_has_no_tax - KeyError: 'CH'
1 failed, 3 passed in 0.04s"""
TAX_FAIL_3 = """.F..                                                                     [100%]
FAILED tests/test_tax.py::test_unknown_country_has_no_tax - AssertionError: assert Decimal('0.0') == Decimal('0.00')
1 failed, 3 passed in 0.04s"""
TAX_PASS = "....                                                                     [100%]\n4 passed in 0.03s"
