"""Secret-shaped data: find it, refuse it, redact it.

evalhub never stores credentials: configuration holds the *names* of environment variables
(``OPENAI_API_KEY``), never their values (DESIGN.md rule 7; known-failure-modes B8 and B12).
This module is the one place that decides what "looks like a secret":

* ``find_secrets(text)`` returns where secret-shaped strings are (kind and offsets, never the
  value itself);
* ``contains_secret`` / ``secret_kinds`` walk JSON-like data (dict keys and values, lists);
* ``validate_no_secrets`` / ``secret_error_for`` turn a finding into a Django
  ``ValidationError`` (code ``secret_shaped``) that names the kind and the field but never
  echoes the value;
* ``redact`` / ``redact_data`` replace findings, and the exact values of known secret
  environment variables, with ``[REDACTED]`` before text reaches a row, a page or a log.

Detection is a superset of the reference checks: the manifest check
``/\\b(?:sk-[A-Za-z0-9]{16,}|Bearer\\s+\\S{16,}|AKIA[0-9A-Z]{16})\\b/`` (live-workflow-matrix.ts)
and the observation ``failure.message`` check ``/\\b(?:sk-[A-Za-z0-9]{16,}|Bearer\\s+\\S{16,})\\b/i``
(upstream-spec §2). Word boundaries are ASCII-only, as in JavaScript.

Where the shapes come from
--------------------------
Token formats that Yelp's detect-secrets (>=1.5,<2) knows are taken from its plugins: we reuse
each plugin's ``denylist`` (the compiled regexes that are the plugin's documented extension
point), recompiled with ASCII semantics and, for bare tokens, ASCII word boundaries so that a
shape embedded in a longer identifier does not count. We do not call ``analyze_line`` or
``core.scan.scan_line``: they read and mutate the process-wide ``get_settings()`` singleton
(``scan_line`` disables a filter and clears caches on every call, and finds nothing at all
unless plugins were configured globally first), they may call a plugin's ``verify()`` (a
network request that *sends the secret to the provider*) when the verification filter is on,
and they return values instead of offsets, which redaction needs. ``analyze_string`` is no
better for offsets: ``GitHubTokenDetector`` yields only the captured ``ghp`` prefix and
``JwtTokenDetector`` stops before the signature. We also keep the library's JWT
well-formedness check (``JwtTokenDetector.is_formally_valid``).

Deliberately not used: ``Base64HighEntropyString`` / ``HexHighEntropyString`` and
``KeywordDetector`` (they flag execution ids such as ``rwe-0123456789abcdef``, sha256 digests
and the word ``password``); ``IbmCloudIamDetector``, ``CloudantDetector`` and
``SoftlayerDetector`` (assignment heuristics: ``key: <any 44-character slug>`` would reject a
long candidate key); ``ArtifactoryDetector`` (``AP`` + hex-ish words); ``IPPublicDetector``
(an IP address is not a secret); ``NpmDetector`` (``//.+/:_authToken=`` backtracks
quadratically on long lines; our own ``_authToken=`` and ``npm_`` rules replace it).

Shape table
-----------
CI = matched case-insensitively; "DS" = the regex of a detect-secrets 1.5 plugin.

==========================  ==================================================  ===  ==========
kind                        shape                                               CI   source
==========================  ==================================================  ===  ==========
OpenAI API key              sk- + 16 alnum (reference); sk-proj-/sk-svcacct-/   yes  reference,
                            sk-admin-/sk-None- + 16 of [A-Za-z0-9_-]                 OpenAI
OpenAI API key              sk-…T3BlbkFJ… (legacy keys)                         no   DS OpenAI
Anthropic API key           sk-ant-[api03-] + 16 of [A-Za-z0-9_-]               yes  Anthropic
OpenRouter API key          sk-or-v1- + 32+ hex                                 yes  OpenRouter
Bearer token                Bearer + whitespace (JS \\s) + 16 non-space, to \\b   yes  reference
HTTP Basic credentials      Authorization: Basic <base64>                       yes  RFC 7617
AWS access key ID           AKIA/ASIA + 16 [0-9A-Z]                             no   reference
AWS access key ID           A3T?/ABIA/ACCA/AKIA/ASIA + 16 [0-9A-Z]              no   DS AWSKey
AWS secret access key       aws…key…'<40 base64>'                               yes  DS AWSKey
Google API key              AIza + 35 of [A-Za-z0-9_-]                          no   Google
Google OAuth client secret  GOCSPX- + 28                                        no   Google
Google OAuth access token   ya29. + 20+                                         no   Google
GitHub token                gh[pousr]_ + 36+ alnum; github_pat_ + 50+           no   GitHub
GitHub token                gh[pousr]_ + 36                                     no   DS GitHub
GitLab token                glpat-/gldt-/glft-/glrt-/glcbt-/… + 20+; GR1348941  no   DS GitLab
Slack token                 xox[abposr]-<digits>-…                              yes  DS Slack
Slack token                 xox[abposre]-<digits>-…, xoxe.xoxp-…, xapp-<d>-…    yes  Slack
Slack webhook URL           hooks.slack.com/services|workflows|triggers/…       yes  DS, Slack
Stripe secret key           sk_/rk_ + live_/test_ + 16+ alnum                   no   Stripe
Stripe secret key           sk_live_/rk_live_ + 24                              no   DS Stripe
Stripe webhook secret       whsec_ + 24+                                        no   Stripe
Hugging Face token          hf_ + 34 letters; api_org_ + 34 letters             no   HF
Groq API key                gsk_ + 48+ alnum (52 today)                         no   Groq
xAI API key                 xai- + 60+ alnum (80 today)                         yes  xAI
Perplexity API key          pplx- + 40+ alnum (48 today)                        yes  Perplexity
Replicate API token         r8_ + 37 alnum                                      no   Replicate
npm token                   npm_ + 36 alnum; .npmrc _authToken=<value>          no   npm
PyPI token                  pypi-AgEIcHlwaS5vcmc… / pypi-AgENdGVzdC5weXBpLm9yZw  no   DS PyPI
DigitalOcean token          dop_v1_/doo_v1_/dor_v1_ + 64 hex                    no   DO
Databricks token            dapi + 32 hex                                       no   Databricks
Shopify token               shpat_/shpca_/shppa_/shpss_ + 32 hex                no   Shopify
Azure storage account key   AccountKey= + 88 base64                             no   DS Azure
IBM COS HMAC secret         [ibm-cos-hmac-]secret[-access]-key = <48 hex>       yes  DS IbmCos
SendGrid API key            SG.<22>.<43>                                        no   DS
Twilio API key              AC/SK + 32 [a-z0-9]                                 no   DS
Mailchimp API key           32 [0-9a-z] + -us<n>                                no   DS
Discord bot token           [MNO]<23-25>.<6>.<27>                               no   DS
Discord webhook URL         discord[app].com/api/webhooks/<id>/<60+>            yes  Discord
Telegram bot token          <8-10 digits>:<35>                                  no   DS
Square OAuth secret         sq0csp- + 43                                        no   DS
Square access token         sq0atp- + 22                                        no   Square
JSON Web Token              eyJ….eyJ….<signature>                               no   RFC 7519
JSON Web Token              eyJ….<…>.<sig>, header and payload are JSON         no   DS Jwt
Private key                 -----BEGIN … PRIVATE KEY----- + base64 [+ END]      yes  RFC 7468
Private key                 BEGIN RSA/EC/DSA/OPENSSH/PGP… PRIVATE KEY, PuTTY    no   DS
Private key                 PuTTY-User-Key-File-2/3:                            yes  PuTTY
URL with embedded password  scheme://user:<password>@host (password only)       n/a  RFC 3986, DS
==========================  ==================================================  ===  ==========

Every DS row adds ASCII word boundaries to the library's regex except the ones that carry
their own context (AWS secret, IBM COS, private key, URL).

No documented, prefixed shape exists for Mistral, Cohere, Azure OpenAI or DeepSeek keys
(DeepSeek and Moonshot use ``sk-`` and are covered by the generic rule), so they are not
recognised on their own. Case-sensitive rules are the ones whose vendors fix the case of the
prefix (``ghp_``, ``AKIA``, ``AIza``; base64 ``eyJ``) or whose upper-case form would read
like an identifier; the reference rules (``sk-``, ``Bearer``) are case-insensitive as in the
upstream observation check. Placeholders (``${DB_PASSWORD}``, ``<password>``, ``{{ token }}``,
``****``) in a URL password or ``_authToken=`` are not findings.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

from detect_secrets.plugins.aws import AWSKeyDetector
from detect_secrets.plugins.azure_storage_key import AzureStorageKeyDetector
from detect_secrets.plugins.basic_auth import BasicAuthDetector
from detect_secrets.plugins.discord import DiscordBotTokenDetector
from detect_secrets.plugins.github_token import GitHubTokenDetector
from detect_secrets.plugins.gitlab_token import GitLabTokenDetector
from detect_secrets.plugins.ibm_cos_hmac import IbmCosHmacDetector
from detect_secrets.plugins.jwt import JwtTokenDetector
from detect_secrets.plugins.mailchimp import MailchimpDetector
from detect_secrets.plugins.openai import OpenAIDetector
from detect_secrets.plugins.private_key import PrivateKeyDetector
from detect_secrets.plugins.pypi_token import PypiTokenDetector
from detect_secrets.plugins.sendgrid import SendGridDetector
from detect_secrets.plugins.slack import SlackDetector
from detect_secrets.plugins.square_oauth import SquareOAuthDetector
from detect_secrets.plugins.stripe import StripeDetector
from detect_secrets.plugins.telegram_token import TelegramBotTokenDetector
from detect_secrets.plugins.twilio import TwilioKeyDetector
from django.core.exceptions import ValidationError
from django.utils.translation import gettext_lazy as _

__all__ = [
    "REDACTION",
    "SecretFinding",
    "contains_secret",
    "find_secrets",
    "redact",
    "redact_data",
    "secret_error_for",
    "secret_kinds",
    "validate_no_secrets",
]

REDACTION = "[REDACTED]"

# Values shorter than this are never redacted by exact match: "abc" would shred every word.
MIN_EXTRA_VALUE_LENGTH = 4


@dataclass(frozen=True)
class SecretFinding:
    """One secret-shaped span of a string: ``text[start:end]``. The value is never kept."""

    kind: str  # e.g. "OpenAI API key"
    start: int
    end: int


@dataclass(frozen=True)
class _Shape:
    kind: str
    pattern: re.Pattern[str]
    # Lower-case substrings; the pattern runs only if one occurs in the lower-cased text
    # (an empty tuple means "always run"). This keeps a 1 MB scan to a few regex passes.
    needles: tuple[str, ...]
    group: int = 0  # 0: the whole match is the secret; n: only group n is (URL passwords)
    accept: Callable[[str], bool] | None = None  # extra check on the secret text


_WORD_END = r"(?![A-Za-z0-9_])"  # ASCII "no word character follows"
_TOKEN_END = r"(?![A-Za-z0-9_-])"  # for bodies that may contain '-'
# JavaScript's \s (the reference regexes are JS) and its complement, so "Bearer\u00a0…" counts.
_JS_SPACE = "\t\n\v\f\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
_PLACEHOLDER = re.compile(
    r"""\$\{?[A-Za-z_][A-Za-z0-9_]*\}?   # $VAR, ${VAR}
      | %\([A-Za-z_][A-Za-z0-9_]*\)s     # %(name)s
      | \{\{.*\}\} | \{[A-Za-z_][A-Za-z0-9_]*\}   # {{ jinja }}, {name}
      | <[^<>]*> | \*+ | x+ | X+         # <password>, ****, xxxx
    """,
    re.ASCII | re.VERBOSE,
)
_SK_BODY = re.compile(
    r"[A-Za-z0-9]{16}"  # the reference shape: sk- + 16 alphanumerics
    r"|(?:proj|svcacct|admin|none|or-v1|ant(?:-[a-z]+[0-9]*)?)-[A-Za-z0-9_-]{16}",
    re.ASCII | re.IGNORECASE,
)


def _not_placeholder(secret: str) -> bool:
    return _PLACEHOLDER.fullmatch(secret) is None


def _sk_body_ok(secret: str) -> bool:
    return _SK_BODY.match(secret, 3) is not None


def _jwt_ok(secret: str) -> bool:
    # The library's check (header and payload decode to JSON) on the part its regex covers.
    return JwtTokenDetector.is_formally_valid(".".join(secret.split(".")[:2]))


def _own(
    kind: str,
    pattern: str,
    needles: Iterable[str],
    *,
    ci: bool = False,
    group: int = 0,
    accept: Callable[[str], bool] | None = None,
) -> _Shape:
    flags = re.ASCII | (re.IGNORECASE if ci else 0)
    return _Shape(kind, re.compile(pattern, flags), tuple(needles), group, accept)


def _library(
    kind: str,
    plugin: type,
    index: int,
    needles: Iterable[str],
    *,
    bounded: bool = True,
    group: int = 0,
    accept: Callable[[str], bool] | None = None,
) -> _Shape:
    """One regex of a detect-secrets plugin's ``denylist``, recompiled with ASCII semantics.

    ``bounded`` adds ASCII word boundaries (the match must not start or end inside a longer
    word), which the library leaves out because it scans source lines, not prose.
    """
    source: re.Pattern[str] = plugin.denylist[index]
    text = source.pattern
    flags = (source.flags & ~re.UNICODE) | re.ASCII
    if bounded:
        newline = "\n" if flags & re.VERBOSE else ""  # a trailing comment must not eat ')'
        text = rf"\b(?:{text}{newline}){_WORD_END}"
    return _Shape(kind, re.compile(text, flags), tuple(needles), group, accept)


_SHAPES: tuple[_Shape, ...] = (
    # Overlapping findings merge; the longest names the result and, on a tie, the earlier row
    # (so sk-ant-… is an "Anthropic API key", not the generic sk- rule's "OpenAI API key").
    _own("Anthropic API key", r"\bsk-ant-[A-Za-z0-9_-]{16,}", ["sk-ant-"], ci=True),
    _own("OpenRouter API key", rf"\bsk-or-v1-[0-9a-f]{{32,}}{_TOKEN_END}", ["sk-or-v1-"], ci=True),
    _own("OpenAI API key", r"\bsk-[A-Za-z0-9_-]+", ["sk-"], ci=True, accept=_sk_body_ok),
    _library("OpenAI API key", OpenAIDetector, 0, ["t3blbkfj"]),
    _own("Bearer token", rf"\bBearer[{_JS_SPACE}]+[^{_JS_SPACE}]{{16,}}\b", ["bearer"], ci=True),
    _own(
        "HTTP Basic credentials",
        r"\bAuthorization[\"']?\s*[:=]\s*[\"']?Basic\s+([A-Za-z0-9+/]{8,}={0,2})",
        ["basic"],
        ci=True,
        group=1,
    ),
    _own("AWS access key ID", rf"\b(?:AKIA|ASIA)[0-9A-Z]{{16}}{_WORD_END}", ["akia", "asia"]),
    _library("AWS access key ID", AWSKeyDetector, 0, ["akia", "asia", "abia", "acca", "a3t"]),
    _library("AWS secret access key", AWSKeyDetector, 1, ["aws"], bounded=False, group=1),
    _own("Google API key", rf"\bAIza[0-9A-Za-z_-]{{35}}{_TOKEN_END}", ["aiza"]),
    _own("Google OAuth client secret", rf"\bGOCSPX-[A-Za-z0-9_-]{{28}}{_TOKEN_END}", ["gocspx-"]),
    _own("Google OAuth access token", r"\bya29\.[0-9A-Za-z_-]{20,}", ["ya29."]),
    _own(
        "GitHub token",
        rf"\b(?:gh[pousr]_[A-Za-z0-9]{{36,}}|github_pat_[A-Za-z0-9_]{{50,}}){_WORD_END}",
        ["ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"],
    ),
    _library("GitHub token", GitHubTokenDetector, 0, ["ghp_", "gho_", "ghu_", "ghs_", "ghr_"]),
    *(
        _library(
            "GitLab token",
            GitLabTokenDetector,
            index,
            ["glpat-", "gldt-", "glft-", "glsoat-", "glrt-", "gr1348941", "glcbt-", "glimt-",
             "glptt-", "glagent-", "gloas-"],
        )
        for index in range(len(GitLabTokenDetector.denylist))
    ),
    _library("Slack token", SlackDetector, 0, ["xox"]),
    _library("Slack webhook URL", SlackDetector, 1, ["hooks.slack.com"]),
    _own(
        "Slack token",
        r"\b(?:xox(?:[abposre]|e\.xox[bp])-[0-9]+-|xapp-[0-9]-)[A-Za-z0-9-]{8,}",
        ["xox", "xapp-"],
        ci=True,
    ),
    _own(
        "Slack webhook URL",
        r"\bhttps://hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/-]{16,}",
        ["hooks.slack.com"],
        ci=True,
    ),
    _own("Stripe secret key", rf"\b[rs]k_(?:live|test)_[0-9A-Za-z]{{16,}}{_WORD_END}", ["k_live_", "k_test_"]),
    _library("Stripe secret key", StripeDetector, 0, ["k_live_"]),
    _own("Stripe webhook secret", r"\bwhsec_[A-Za-z0-9+/=]{24,}", ["whsec_"]),
    _own("Hugging Face token", rf"\b(?:hf_|api_org_)[A-Za-z]{{34,}}{_WORD_END}", ["hf_", "api_org_"]),
    _own("Groq API key", rf"\bgsk_[A-Za-z0-9]{{48,}}{_WORD_END}", ["gsk_"]),
    _own("xAI API key", rf"\bxai-[A-Za-z0-9]{{60,}}{_WORD_END}", ["xai-"], ci=True),
    _own("Perplexity API key", rf"\bpplx-[A-Za-z0-9]{{40,}}{_WORD_END}", ["pplx-"], ci=True),
    _own("Replicate API token", rf"\br8_[A-Za-z0-9]{{37}}{_WORD_END}", ["r8_"]),
    _own("npm token", rf"\bnpm_[A-Za-z0-9]{{36}}{_WORD_END}", ["npm_"]),
    _own(
        "npm token",
        r"_authToken\s*=\s*[\"']?([^\s\"']+)",
        ["_authtoken"],
        group=1,
        accept=_not_placeholder,
    ),
    _library("PyPI token", PypiTokenDetector, 0, ["pypi-"]),
    _library("PyPI token", PypiTokenDetector, 1, ["pypi-"]),
    _own("DigitalOcean token", rf"\bdo[opr]_v1_[a-f0-9]{{64}}{_WORD_END}", ["_v1_"]),
    _own("Databricks token", rf"\bdapi[a-f0-9]{{32}}(?:-[0-9]+)?{_WORD_END}", ["dapi"]),
    _own("Shopify token", rf"\bshp(?:at|ca|pa|ss)_[a-fA-F0-9]{{32}}{_WORD_END}", ["shp"]),
    _library("Azure storage account key", AzureStorageKeyDetector, 0, ["accountkey="]),
    _library("IBM COS HMAC secret", IbmCosHmacDetector, 0, ["secret"], bounded=False, group=1),
    _library("SendGrid API key", SendGridDetector, 0, ["sg."]),
    _library("Twilio API key", TwilioKeyDetector, 0, ["ac"]),
    _library("Twilio API key", TwilioKeyDetector, 1, ["sk"]),
    _library("Mailchimp API key", MailchimpDetector, 0, ["-us"]),
    _library("Discord bot token", DiscordBotTokenDetector, 0, ["."]),
    _own(
        "Discord webhook URL",
        r"\bhttps://(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/[0-9]+/([A-Za-z0-9_-]{60,})",
        ["/api/webhooks/"],
        ci=True,
        group=1,
    ),
    _library("Telegram bot token", TelegramBotTokenDetector, 0, [":"]),
    _library("Square OAuth secret", SquareOAuthDetector, 0, ["sq0csp-"]),
    _own("Square access token", rf"\bsq0atp-[0-9A-Za-z_-]{{22}}{_TOKEN_END}", ["sq0atp-"]),
    _own(
        "JSON Web Token",
        r"\beyJ[A-Za-z0-9_-]{8,}={0,2}\.eyJ[A-Za-z0-9_-]{8,}={0,2}\.[A-Za-z0-9_+/=-]*",
        ["eyj"],
    ),
    # The library regex stops before the signature; the extension below redacts it too.
    _Shape(
        "JSON Web Token",
        re.compile(rf"\b(?:{JwtTokenDetector.denylist[0].pattern})[A-Za-z0-9_+/=-]*", re.ASCII),
        ("eyj",),
        accept=_jwt_ok,
    ),
    _own(
        "Private key",
        # The header, any RFC 1421 headers, the base64 lines (real newlines or JSON-escaped
        # "\n") and the END line if it follows. No lazy "anything up to END": that would
        # rescan the rest of the text for every header (quadratic on adversarial input).
        r"-----BEGIN[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----"
        r"(?:(?:\s|\\[rn])*(?:Proc-Type|DEK-Info|Comment):[^\r\n\\]*)*"
        r"(?:(?:\s|\\[rn])*[A-Za-z0-9+/=]+)*"
        r"(?:(?:\s|\\[rn])*-----END[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----)?",
        ["private key"],
        ci=True,
    ),
    *(
        _library("Private key", PrivateKeyDetector, index, ["private key", "putty-user-key-file"],
                 bounded=False)
        for index in range(len(PrivateKeyDetector.denylist))
    ),
    _own("Private key", r"\bPuTTY-User-Key-File-[23]:", ["putty-user-key-file"], ci=True),
    _own(
        "URL with embedded password",
        r"://[^\s:/?#@'\"<>]+:([^\s/?#@'\"<>]+)@",
        ["://"],
        group=1,
        accept=_not_placeholder,
    ),
    _library(
        "URL with embedded password",
        BasicAuthDetector,
        0,
        ["://"],
        bounded=False,
        group=1,
        accept=_not_placeholder,
    ),
)

# Example variable names for the error message, by kind; anything else suggests OPENAI_API_KEY.
_ENV_EXAMPLES = {
    "Anthropic API key": "ANTHROPIC_API_KEY",
    "OpenRouter API key": "OPENROUTER_API_KEY",
    "AWS access key ID": "AWS_ACCESS_KEY_ID",
    "AWS secret access key": "AWS_SECRET_ACCESS_KEY",
    "Google API key": "GEMINI_API_KEY",
    "GitHub token": "GITHUB_TOKEN",
    "GitLab token": "GITLAB_TOKEN",
    "Hugging Face token": "HF_TOKEN",
    "Groq API key": "GROQ_API_KEY",
    "xAI API key": "XAI_API_KEY",
    "Perplexity API key": "PERPLEXITY_API_KEY",
    "URL with embedded password": "DATABASE_URL",
}
_DEFAULT_ENV_EXAMPLE = "OPENAI_API_KEY"


def find_secrets(text: str) -> list[SecretFinding]:
    """Secret-shaped spans of ``text``: non-overlapping, sorted by ``start``.

    Overlapping matches (a JWT inside a ``Bearer`` header, the PEM header inside its block) are
    merged into one finding covering both; its ``kind`` is that of the longest match (ties go
    to the earlier row of the shape table). For URLs only the password is the finding.
    """
    if not text:
        return []
    lowered = text.lower()
    present: dict[str, bool] = {}  # each needle is searched for once per call

    def has(needle: str) -> bool:
        found = present.get(needle)
        if found is None:
            found = present[needle] = needle in lowered
        return found

    raw: list[tuple[int, int, int, str]] = []  # (start, end, table row, kind)
    for row, shape in enumerate(_SHAPES):
        if shape.needles and not any(has(needle) for needle in shape.needles):
            continue
        for match in shape.pattern.finditer(text):
            start, end = match.span(shape.group)
            if start < 0 or start == end:
                continue
            if shape.accept is not None and not shape.accept(text[start:end]):
                continue
            raw.append((start, end, row, shape.kind))
    if not raw:
        return []
    raw.sort(key=lambda item: (item[0], -item[1], item[2]))
    findings: list[SecretFinding] = []
    start, end, row, kind = raw[0]
    best = (end - start, -row)
    for next_start, next_end, next_row, next_kind in raw[1:]:
        if next_start < end:  # overlaps the current cluster
            end = max(end, next_end)
            score = (next_end - next_start, -next_row)
            if score > best:
                best, kind = score, next_kind
            continue
        findings.append(SecretFinding(kind, start, end))
        start, end, kind = next_start, next_end, next_kind
        best = (end - start, -next_row)
    findings.append(SecretFinding(kind, start, end))
    return findings


def _strings(value: object) -> Iterable[str]:
    """Every ``str`` inside JSON-like ``value`` (dict keys and values, lists, tuples, sets)."""
    stack: list[object] = [value]
    seen: set[int] = set()
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            yield item
        elif isinstance(item, (dict, list, tuple, set, frozenset)):
            if id(item) in seen:  # a self-referencing structure
                continue
            seen.add(id(item))
            if isinstance(item, dict):
                children: list[object] = []
                for key, child in item.items():
                    children.extend((key, child))
            else:
                children = list(item)
            stack.extend(reversed(children))


def contains_secret(value: object) -> bool:
    """Whether ``value`` (a ``str`` or JSON-like data, dict keys included) holds a secret shape.

    Non-``str`` scalars (numbers, booleans, ``None``) are ignored.
    """
    return any(find_secrets(text) for text in _strings(value))


def secret_kinds(value: object) -> list[str]:
    """Distinct kinds of secret found in ``value`` (walked like ``contains_secret``), in order
    of first appearance. For messages: kinds are fixed labels, never parts of the value."""
    kinds: list[str] = []
    for text in _strings(value):
        for finding in find_secrets(text):
            if finding.kind not in kinds:
                kinds.append(finding.kind)
    return kinds


def _prepare_extra_values(extra_values: Iterable[str]) -> tuple[str, ...]:
    values: set[str] = set()
    for value in extra_values:
        if not isinstance(value, str):
            continue
        # An environment value read with its trailing newline still matches the bare value.
        for candidate in (value, value.strip()):
            if len(candidate) >= MIN_EXTRA_VALUE_LENGTH:
                values.add(candidate)
    return tuple(sorted(values, key=lambda item: (-len(item), item)))


#: A known secret value this long or longer is also scrubbed in pieces: any run of at least
#: FRAGMENT_LENGTH of its characters. A key streamed back in two chunks (two protocol frames,
#: each scrubbed alone) would otherwise leave its tail in the second one.
FRAGMENT_MIN_VALUE_LENGTH = 16
FRAGMENT_LENGTH = 8


@functools.lru_cache(maxsize=64)
def _fragment_pattern(value: str) -> re.Pattern[str]:
    grams = sorted({value[i : i + FRAGMENT_LENGTH] for i in range(len(value) - FRAGMENT_LENGTH + 1)})
    # A lookahead finds every (overlapping) start of a known piece in one pass.
    return re.compile("(?=(" + "|".join(re.escape(gram) for gram in grams) + "))")


def _fragment_spans(text: str, value: str) -> list[tuple[int, int]]:
    if len(value) < FRAGMENT_MIN_VALUE_LENGTH or len(text) < FRAGMENT_LENGTH:
        return []
    return [(match.start(), match.start() + FRAGMENT_LENGTH) for match in _fragment_pattern(value).finditer(text)]


def _redact(text: str, extra_values: tuple[str, ...]) -> str:
    spans = [(finding.start, finding.end) for finding in find_secrets(text)]
    for value in extra_values:  # longest first; spans are unioned, so order cannot leak a part
        index = text.find(value)
        while index != -1:
            spans.append((index, index + len(value)))
            index = text.find(value, index + 1)
        spans.extend(_fragment_spans(text, value))
    if not spans:
        return text
    spans.sort()
    pieces: list[str] = []
    position = 0
    current_start, current_end = spans[0]
    for start, end in spans[1:]:
        if start < current_end:
            current_end = max(current_end, end)
            continue
        pieces.extend((text[position:current_start], REDACTION))
        position = current_end
        current_start, current_end = start, end
    pieces.extend((text[position:current_start], REDACTION, text[current_end:]))
    return "".join(pieces)


def redact(text: str, *, extra_values: Iterable[str] = ()) -> str:
    """``text`` with every secret-shaped span replaced by ``REDACTION``.

    ``extra_values`` are exact secret values (e.g. the values of a candidate's required
    environment variables): every occurrence of each one of at least 4 characters is replaced
    as well, longest first, whether or not it looks like a secret, and so is every run of
    ``FRAGMENT_LENGTH`` or more characters of a value of ``FRAGMENT_MIN_VALUE_LENGTH`` or more
    (a key split across two streamed chunks). Overlapping or touching spans become a single
    ``REDACTION``.
    """
    return _redact(text, _prepare_extra_values(extra_values))


_T = TypeVar("_T")


def _redact_value(value: _T, extra_values: tuple[str, ...]) -> _T:
    if isinstance(value, str):
        return _redact(value, extra_values)  # type: ignore[return-value]
    if isinstance(value, dict):
        result: dict[Any, Any] = {}
        for key, child in value.items():
            new_key = _redact(key, extra_values) if isinstance(key, str) else key
            if new_key in result:  # two keys redacted to the same text: keep both entries
                suffix = 2
                while f"{new_key} ({suffix})" in result:
                    suffix += 1
                new_key = f"{new_key} ({suffix})"
            result[new_key] = _redact_value(child, extra_values)
        return result  # type: ignore[return-value]
    if isinstance(value, (list, tuple)):
        return type(value)(_redact_value(child, extra_values) for child in value)  # type: ignore[return-value]
    return value


def redact_data(value: _T, *, extra_values: Iterable[str] = ()) -> _T:
    """A deep copy of JSON-like ``value`` (dicts, lists, tuples) with every ``str`` — dict keys
    included — passed through ``redact``. Other values are returned unchanged. If two keys
    redact to the same text, the later one gets a " (2)" suffix rather than overwriting."""
    return _redact_value(value, _prepare_extra_values(extra_values))


_SECRET_MESSAGE = _(
    "This looks like a secret (%(kinds)s). Store the name of the environment variable that "
    "holds it (such as %(example)s), never the value."
)
_FIELD_SECRET_MESSAGE = _(
    "%(field)s looks like it contains a secret (%(kinds)s). Store the name of the environment "
    "variable that holds it (such as %(example)s), never the value."
)


def _params(kinds: list[str]) -> dict[str, str]:
    return {
        "kinds": ", ".join(kinds),
        "example": _ENV_EXAMPLES.get(kinds[0], _DEFAULT_ENV_EXAMPLE),
    }


def validate_no_secrets(value: object) -> None:
    """Django validator: raise ``ValidationError(code="secret_shaped")`` if ``value`` (text or
    JSON-like data, dict keys included) holds a secret shape. The message names the kind(s)
    and what to store instead; it never contains the value or any part of it."""
    kinds = secret_kinds(value)
    if kinds:
        raise ValidationError(_SECRET_MESSAGE, code="secret_shaped", params=_params(kinds))


def secret_error_for(field_label: str, value: object) -> ValidationError | None:
    """The ``secret_shaped`` error for a field, or ``None`` if ``value`` is clean.

    The message starts with ``field_label`` ("Required env looks like it contains a secret
    (OpenAI API key). …") and, like ``validate_no_secrets``, never echoes the value.
    """
    kinds = secret_kinds(value)
    if not kinds:
        return None
    return ValidationError(
        _FIELD_SECRET_MESSAGE,
        code="secret_shaped",
        params={"field": field_label, **_params(kinds)},
    )
