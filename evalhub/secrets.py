"""Secret-shaped data: find it, refuse it, redact it.

evalhub never stores credentials: configuration holds the *names* of environment variables
(``OPENAI_API_KEY``), never their values (docs/DESIGN.md rule 7; docs/failure-modes.md B8 and B12).
This module is the one place that decides what "looks like a secret":

* ``find_secrets(text)`` returns where secret-shaped strings are (kind and offsets, never the
  value itself);
* ``contains_secret`` / ``secret_kinds`` walk JSON-like data (dict keys and values, lists);
* ``evalhub.validation`` turns a finding into a Django ``ValidationError`` (code
  ``secret_shaped``) that names the kind and the field but never echoes the value;
* ``redact`` / ``redact_data`` replace findings, and the exact values of known secret
  environment variables, with ``[REDACTED]`` before text reaches a row, a page or a log.

How a text is read
------------------
A key is a key however it was pasted. Every text is scanned as it is and as a person reads it
(``evalhub.scan_views``): JSON string escapes decoded (``"sk-\\u0070roj-…"``), compatibility forms
folded by NFKC (a full-width ``ｓｋ－ｐｒｏｊ－…``, mathematical letters), default-ignorable
characters removed (a zero-width space, joiner, soft hyphen or BOM inside a key) and hyphen
look-alikes (non-breaking hyphen, minus sign) read as ``-``. Offsets are always the original
text's, widened to whole escape sequences and whole characters.

A key glued to what comes before it still counts: shapes with a long, specific prefix
(``sk-proj-``, ``sk-ant-``, ``ghp_``, ``glpat-``, ``xai-`` …) match wherever they start
(``OPENAI_API_KEYsk-proj-…``); the others may follow ``_`` (``OPENAI_sk-…``) but not a letter or
digit (``task-sk-…`` is not a key, ``risk-assessment`` neither). An environment variable *name*
(capitals, digits and ``_`` only) is never a finding, whatever prefix it starts with.

Scrubbing replaces the secret and nothing else. Where a text is JSON (a document, or NDJSON
lines) a span never leaves the string literal it is in — a match that runs past the closing
quote is dropped and the literals it touched are scanned again on their own — and a known
value inside a number becomes the string ``"[REDACTED]"``, so a scrubbed frame is JSON with the
same keys (DESIGN.md rule 7). Elsewhere the open-ended reference token (``Bearer\\s+\\S{16,}``)
ends at the first quote, backslash, comma, semicolon or angle bracket.

Speed: the shapes are compiled once; each needle (a lower-case substring that must occur for a
shape to be tried) is looked for in a single Aho-Corasick pass (pyahocorasick) whatever the
number of shapes, and literal prefixes come before their boundary checks so the regex engine
searches for them at C speed.

Detection is a superset of the reference checks: the manifest check
``/\\b(?:sk-[A-Za-z0-9]{16,}|Bearer\\s+\\S{16,}|AKIA[0-9A-Z]{16})\\b/`` (live-workflow-matrix.ts)
and the observation ``failure.message`` check ``/\\b(?:sk-[A-Za-z0-9]{16,}|Bearer\\s+\\S{16,})\\b/i``
(the reference observation schema's rule). Word boundaries are ASCII-only, as in JavaScript.

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

===============================  ==================================================  ===  ==========
kind                             shape                                               CI   source
===============================  ==================================================  ===  ==========
OpenAI API key                   sk- + 16 alnum (reference); sk-proj-/sk-svcacct-/   yes  reference,
                                 sk-admin-/sk-None- + 16 of [A-Za-z0-9_-]; sk- + 1-3      OpenAI
                                 labels (sk-live-) + 16 alnum
OpenAI API key                   sk-…T3BlbkFJ… (legacy keys)                         no   DS OpenAI
Anthropic API key                sk-ant-[api03-|admin01-|oat01-] + 16+               yes  Anthropic
OpenRouter API key               sk-or-v1- + 32+ hex                                 yes  OpenRouter
Google API key                   AIza + 35 of [A-Za-z0-9_-]                          no   Google
Google OAuth client secret       GOCSPX- + 28                                        no   Google
Google OAuth access token        ya29. + 20+                                         no   Google
Google OAuth refresh token       1//0 + 40+                                          no   Google
xAI API key                      xai- + 60+ alnum (80 today)                         yes  xAI
Groq API key                     gsk_ + 48+ alnum (52 today)                         no   Groq
Perplexity API key               pplx- + 40+ alnum (48 today)                        yes  Perplexity
Hugging Face token               hf_ + 34 letters; api_org_ + 34 letters             no   HF
Replicate API token              r8_ + 37 alnum                                      no   Replicate
Together AI API key              tgp_v1_ + 40+                                       no   Together
Fireworks AI API key             fw_ + 24+ alnum                                     no   Fireworks
Cerebras API key                 csk- + 40+ [a-z0-9]                                 no   Cerebras
NVIDIA API key                   nvapi- + 60+                                        no   NVIDIA
AWS Bedrock API key              ABSK + 60+ base64; bedrock-api-key- + 40+           no   AWS
LangSmith API key                lsv2_pt_/lsv2_sk_ + 32 hex _ 10 hex                 no   LangChain
Pinecone API key                 pcsk_ + 50+                                         no   Pinecone
ElevenLabs API key               sk_ + 48 hex                                        no   ElevenLabs
Anyscale API key                 esecret_ + 20+                                      no   Anyscale
Bearer token                     Bearer + whitespace (JS \\s) + 16 non-space, to \\b   yes  reference
HTTP Basic credentials           Authorization: Basic <base64>                       yes  RFC 7617
AWS access key ID                AKIA/ASIA + 16 [0-9A-Z]                             no   reference
AWS access key ID                A3T?/ABIA/ACCA/AKIA/ASIA + 16 [0-9A-Z]              no   DS AWSKey
AWS secret access key            aws…key…'<40 base64>'                               yes  DS AWSKey
Azure storage account key        AccountKey= + 88 base64                             no   DS Azure
IBM COS HMAC secret              [ibm-cos-hmac-]secret[-access]-key = <48 hex>       yes  DS IbmCos
DigitalOcean token               dop_v1_/doo_v1_/dor_v1_ + 64 hex                    no   DO
Databricks token                 dapi + 32 hex                                       no   Databricks
HashiCorp Vault token            hvs./hvb./hvr. + 60+                                no   HashiCorp
Terraform Cloud token            <14>.atlasv1.<60+>                                  no   HashiCorp
Heroku API key                   HRKU- + 30+                                         no   Heroku
Fly.io token                     fo1_ + 40+                                          no   Fly.io
Render API key                   rnd_ + 32+ alnum                                    no   Render
Supabase key                     sbp_ + 40 hex; sb_secret_ + 20+                     no   Supabase
PlanetScale token                pscale_tkn_/pscale_pw_/pscale_oauth_ + 32+          no   PlanetScale
Pulumi access token              pul- + 40 hex                                       no   Pulumi
Doppler token                    dp.pt./dp.st./dp.sa./… + 40+                        no   Doppler
1Password service account token  ops_eyJ + 100+                                      no   1Password
age secret key                   AGE-SECRET-KEY-1 + 58 bech32                        no   age
GitHub token                     gh[pousr]_ + 36+ alnum; github_pat_ + 50+           no   GitHub
GitHub token                     gh[pousr]_ + 36                                     no   DS GitHub
GitLab token                     glpat-/gldt-/glft-/glrt-/glcbt-/… + 20+; GR1348941  no   DS GitLab
GitLab token                     the same, routable (….01.<crc>), and glffct-        no   GitLab
Bitbucket app password           ATBB + 32+ alnum                                    no   Atlassian
Atlassian API token              ATATT3/ATCTT3 + 50+ (Bitbucket access tokens)       no   Atlassian
Azure DevOps token               76 alnum + AZDO + 4                                 no   Microsoft
Docker Hub token                 dckr_pat_/dckr_oat_ + 27+                           no   Docker
npm token                        npm_ + 36 alnum; .npmrc _authToken=<value>          no   npm
PyPI token                       pypi-AgEIcHlwaS5vcmc… / pypi-AgENdGVzdC5weXBpLm9yZw  no   DS PyPI
RubyGems API key                 rubygems_ + 48 hex                                  no   RubyGems
crates.io token                  cio + 32 alnum                                      no   crates.io
NuGet API key                    oy2 + 43 [a-z0-9]                                   no   NuGet
Sourcegraph token                sgp_[<16 hex>_|local_] + 40 hex                     no   Sourcegraph
Netlify token                    nfp_ + 36+ alnum                                    no   Netlify
Linear API key                   lin_api_ + 40 alnum                                 no   Linear
Postman API key                  PMAK-<24 hex>-<34 hex>                              no   Postman
Figma token                      figd_ + 40+                                         no   Figma
Grafana token                    glc_ + 32+ base64; glsa_<32>_<8 hex>                no   Grafana
Sentry token                     sntrys_/sntryu_ + 40+                               no   Sentry
Slack token                      xox[abposr]-<digits>-…                              yes  DS Slack
Slack token                      xox[abposre]-<digits>-…, xoxe.xoxp-…, xapp-<d>-…    yes  Slack
Slack webhook URL                hooks.slack.com/services|workflows|triggers/…       yes  DS, Slack
Stripe secret key                sk_/rk_ + live_/test_ + 16+ alnum                   no   Stripe
Stripe secret key                sk_live_/rk_live_ + 24                              no   DS Stripe
Stripe webhook secret            whsec_ + 24+                                        no   Stripe
Shopify token                    shpat_/shpca_/shppa_/shpss_ + 32 hex                no   Shopify
SendGrid API key                 SG.<22>.<43>                                        no   DS
Twilio API key                   AC/SK + 32 [a-z0-9]                                 no   DS
Mailchimp API key                32 [0-9a-z] + -us<n>                                no   DS
Mailgun API key                  key- + 32 hex                                       no   Mailgun
Notion token                     ntn_ + 40+; secret_ + 43 alnum                      no   Notion
New Relic API key                NRAK- + 27 [A-Z0-9]                                 no   New Relic
Dynatrace token                  dt0c01.<24>.<64>                                    no   Dynatrace
Mapbox secret token              sk.eyJ….…                                           no   Mapbox
Contentful token                 CFPAT- + 43                                         no   Contentful
Discord bot token                [MNO]<23-25>.<6>.<27>                               no   DS
Discord webhook URL              discord[app].com/api/webhooks/<id>/<60+>            yes  Discord
Telegram bot token               <8-10 digits>:<35>                                  no   DS
Square OAuth secret              sq0csp- + 43                                        no   DS
Square access token              sq0atp- + 22                                        no   Square
JSON Web Token                   eyJ….eyJ….<signature>                               no   RFC 7519
JSON Web Token                   eyJ….<…>.<sig>, header and payload are JSON         no   DS Jwt
Private key                      -----BEGIN … PRIVATE KEY----- + base64 [+ END]      yes  RFC 7468
Private key                      BEGIN RSA/EC/DSA/OPENSSH/PGP… PRIVATE KEY, PuTTY    no   DS
Private key                      PuTTY-User-Key-File-2/3:                            yes  PuTTY
URL with embedded password       scheme://user:<password>@host (password only)       n/a  RFC 3986, DS
===============================  ==================================================  ===  ==========

Every DS row adds ASCII word boundaries to the library's regex except the ones that carry
their own context (AWS secret, IBM COS, private key, URL).

No documented, prefixed shape exists for Mistral, Cohere, Azure OpenAI, Voyage or DeepSeek keys
(DeepSeek, Moonshot and DashScope use ``sk-`` and are covered by the generic rule), nor for
Gitea/Forgejo tokens (40 hex, like a commit id), so they are not recognised on their own. Case-sensitive rules are the ones whose vendors fix the case of the
prefix (``ghp_``, ``AKIA``, ``AIza``; base64 ``eyJ``) or whose upper-case form would read
like an identifier; the reference rules (``sk-``, ``Bearer``) are case-insensitive as in the
upstream observation check. Placeholders (``${DB_PASSWORD}``, ``<password>``, ``{{ token }}``,
``****``) in a URL password or ``_authToken=`` are not findings.
"""

from __future__ import annotations

import functools
import re
from bisect import bisect_right
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeVar

import ahocorasick
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

from evalhub.scan_views import View, fold_text, json_documents, json_view, literal_spans, literal_view, normalized_view, scalar_spans

__all__ = [
    "REDACTION",
    "SecretFinding",
    "contains_secret",
    "env_example",
    "find_secrets",
    "redact",
    "redact_data",
    "secret_kinds",
]

REDACTION = "[REDACTED]"
#: What replaces a JSON number, ``true``, ``false`` or ``null`` that holds a known secret value:
#: a string, so the document stays JSON.
QUOTED_REDACTION = '"' + REDACTION + '"'

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
    # Group 1 is an open-ended token (the reference's ``Bearer\s+\S{16,}``): the secret ends
    # at the first quote, comma, semicolon or backslash, so a token inside quoted
    # text never takes the rest of the line with it.
    clip: bool = False


_WORD_END = r"(?![A-Za-z0-9_])"  # ASCII "no word character follows"
_TOKEN_END = r"(?![A-Za-z0-9_-])"  # for bodies that may contain '-'
# What may not come just before a shape (see _at). A key glued to an identifier by '_'
# (``OPENAI_sk-…``) still counts (_ALNUM); glued to a letter or digit it is part of a longer word.
# Shapes with a long, specific prefix (``sk-proj-``, ``ghp_``) take no left boundary at all:
# ``KEYsk-proj-…`` is the key. The reference rules keep \b (_WORD).
_WORD = "[A-Za-z0-9_]"  # what \b tests before a shape that starts with a word character
_ALNUM = "[A-Za-z0-9]"


def _at(prefix: str, before: str = _WORD) -> str:
    """The literal ``prefix`` not preceded by a character of the class ``before`` (``""``: by
    anything). The test comes after the literal, as a lookbehind, so that the regex engine can
    search for the literal itself at C speed (a leading ``\b`` or lookbehind makes it try every
    position of a long text)."""
    literal = re.escape(prefix)
    return f"{literal}(?<!{before}{literal})" if before else literal


# JavaScript's \s (the reference regexes are JS) and its complement, so "Bearer\u00a0…" counts.
_JS_SPACE = "\t\n\v\f\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
#: Characters that end a clipped token: quotes, angle brackets, backslash, comma, semicolon (the
#: delimiters of quoted and structured text; `${VAR}` and `(…)` stay part of the token).
_TOKEN_STOP = re.compile(r"[\"'`<>\\,;]")
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
    r"|(?:proj|svcacct|admin|none|or-v1|ant(?:-[a-z]+[0-9]*)?)-[A-Za-z0-9_-]{16}"
    # The reference shape behind up to three labels (sk-live-…, sk-test-…, sk-org-prod-…):
    # providers and proxies mint such keys, and without the label the run is a key.
    r"|(?:[A-Za-z0-9]+[-_]){1,3}[A-Za-z0-9]{16}",
    re.ASCII | re.IGNORECASE,
)
# An environment variable NAME (capitals, digits, underscores) is never a secret, whatever
# prefix it starts with.
_ENV_NAME = re.compile(r"[A-Z0-9_]+", re.ASCII)


def _not_placeholder(secret: str) -> bool:
    return _PLACEHOLDER.fullmatch(secret) is None


def _not_env_name(secret: str) -> bool:
    return _ENV_NAME.fullmatch(secret) is None


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
    clip: bool = False,
) -> _Shape:
    flags = re.ASCII | (re.IGNORECASE if ci else 0)
    return _Shape(kind, re.compile(pattern, flags), tuple(needles), group, accept, clip)


def _library(
    kind: str,
    plugin: type,
    index: int,
    needles: Iterable[str],
    *,
    bounded: bool = True,
    before: str = _WORD,
    group: int = 0,
    accept: Callable[[str], bool] | None = None,
) -> _Shape:
    """One regex of a detect-secrets plugin's ``denylist``, recompiled with ASCII semantics.

    ``bounded`` adds ASCII word boundaries (the match must not start or end inside a longer
    word), which the library leaves out because it scans source lines, not prose; ``before`` is
    the class of characters that may not come just before it (``_WORD`` as ``\\b`` does,
    ``_ALNUM`` to let ``_`` glue, ``""`` for a prefix that is a key wherever it starts). A
    leading literal is searched for as a literal (see :func:`_at`).
    """
    source: re.Pattern[str] = plugin.denylist[index]
    text = source.pattern
    flags = (source.flags & ~re.UNICODE) | re.ASCII
    if bounded:
        newline = "\n" if flags & re.VERBOSE else ""  # a trailing comment must not eat ')'
        prefix = _LEAD_LITERAL.match(text)
        literal = prefix.group() if prefix and "|" not in text else ""
        if literal and text[len(literal) : len(literal) + 1] in ("*", "+", "?", "{"):
            literal = literal[:-1]  # the last character belongs to a quantifier
        if literal:
            text = rf"{_at(literal, before)}(?:{text[len(literal) :]}{newline}){_WORD_END}"
        elif before:
            text = rf"(?<!{before})(?:{text}{newline}){_WORD_END}"
        else:
            text = rf"(?:{text}{newline}){_WORD_END}"
    return _Shape(kind, re.compile(text, flags), tuple(needles), group, accept)


_LEAD_LITERAL = re.compile(r"[A-Za-z0-9_-]+")
_GITLAB_PREFIXES = ("glpat-", "gldt-", "glft-", "glsoat-", "glrt-", "gr1348941", "glcbt-", "glimt-", "glptt-", "glagent-", "gloas-")

_SHAPES: tuple[_Shape, ...] = (
    # Overlapping findings merge; the longest names the result and, on a tie, the earlier row
    # (so sk-ant-… is an "Anthropic API key", not the generic sk- rule's "OpenAI API key").
    # --- model providers ------------------------------------------------------------------------
    _own("Anthropic API key", r"sk-ant-[A-Za-z0-9_-]{16,}", ["sk-ant-"], ci=True),
    _own("OpenRouter API key", rf"sk-or-v1-[0-9a-f]{{32,}}{_TOKEN_END}", ["sk-or-v1-"], ci=True),
    _own(
        "OpenAI API key",
        r"sk-(?:proj|svcacct|admin|none)-[A-Za-z0-9_-]{16,}",
        ["sk-proj-", "sk-svcacct-", "sk-admin-", "sk-none-"],
        ci=True,
    ),
    _own("OpenAI API key", rf"{_at('sk-', _ALNUM)}[A-Za-z0-9_-]+", ["sk-"], ci=True, accept=_sk_body_ok),
    _library("OpenAI API key", OpenAIDetector, 0, ["t3blbkfj"], before=_ALNUM),
    _own("Google API key", rf"{_at('AIza', _ALNUM)}[0-9A-Za-z_-]{{35}}{_TOKEN_END}", ["aiza"]),
    _own("Google OAuth client secret", rf"GOCSPX-[A-Za-z0-9_-]{{28}}{_TOKEN_END}", ["gocspx-"]),
    _own("Google OAuth access token", rf"{_at('ya29.', _ALNUM)}[0-9A-Za-z_-]{{20,}}", ["ya29."]),
    _own("Google OAuth refresh token", rf"{_at('1//0')}[0-9A-Za-z_-]{{40,}}", ["1//0"]),
    _own("xAI API key", rf"xai-[A-Za-z0-9]{{60,}}{_WORD_END}", ["xai-"], ci=True),
    _own("Groq API key", rf"gsk_[A-Za-z0-9]{{48,}}{_WORD_END}", ["gsk_"]),
    _own("Perplexity API key", rf"pplx-[A-Za-z0-9]{{40,}}{_WORD_END}", ["pplx-"], ci=True),
    _own("Hugging Face token", rf"(?:{_at('hf_', _ALNUM)}|{_at('api_org_', _ALNUM)})[A-Za-z]{{34,}}{_WORD_END}", ["hf_", "api_org_"]),
    _own("Replicate API token", rf"{_at('r8_', _ALNUM)}[A-Za-z0-9]{{37}}{_WORD_END}", ["r8_"]),
    _own("Together AI API key", r"tgp_v1_[A-Za-z0-9_-]{40,}", ["tgp_v1_"]),
    _own("Fireworks AI API key", rf"{_at('fw_', _ALNUM)}[A-Za-z0-9]{{24,}}{_WORD_END}", ["fw_"]),
    _own("Cerebras API key", rf"{_at('csk-', _ALNUM)}[a-z0-9]{{40,}}{_WORD_END}", ["csk-"]),
    _own("NVIDIA API key", r"nvapi-[A-Za-z0-9_-]{60,}", ["nvapi-"]),
    _own("AWS Bedrock API key", rf"{_at('ABSK', _ALNUM)}[A-Za-z0-9+/]{{60,}}={{0,2}}", ["absk"]),
    _own("AWS Bedrock API key", r"bedrock-api-key-[A-Za-z0-9+/=%]{40,}", ["bedrock-api-key-"]),
    _own("LangSmith API key", rf"lsv2_(?:pt|sk)_[a-f0-9]{{32}}_[a-f0-9]{{10}}{_WORD_END}", ["lsv2_"]),
    _own("Pinecone API key", r"pcsk_[A-Za-z0-9_]{50,}", ["pcsk_"]),
    _own("ElevenLabs API key", rf"{_at('sk_', _ALNUM)}[a-f0-9]{{48}}{_WORD_END}", ["sk_"]),
    _own("Anyscale API key", r"esecret_[A-Za-z0-9]{20,}", ["esecret_"]),
    # --- HTTP credentials -----------------------------------------------------------------------
    _own("Bearer token", rf"{_at('Bearer')}[{_JS_SPACE}]+([^{_JS_SPACE}]{{16,}})\b", ["bearer"], ci=True, clip=True),
    _own(
        "HTTP Basic credentials",
        rf"{_at('Authorization')}[\"']?\s*[:=]\s*[\"']?Basic\s+([A-Za-z0-9+/]{{8,}}={{0,2}})",
        ["basic"],
        ci=True,
        group=1,
    ),
    # --- cloud ----------------------------------------------------------------------------------
    _own("AWS access key ID", rf"(?:{_at('AKIA')}|{_at('ASIA')})[0-9A-Z]{{16}}{_WORD_END}", ["akia", "asia"]),
    _library("AWS access key ID", AWSKeyDetector, 0, ["akia", "asia", "abia", "acca", "a3t"]),
    _library("AWS secret access key", AWSKeyDetector, 1, ["aws"], bounded=False, group=1),
    _library("Azure storage account key", AzureStorageKeyDetector, 0, ["accountkey="]),
    _library("IBM COS HMAC secret", IbmCosHmacDetector, 0, ["secret"], bounded=False, group=1),
    _own("DigitalOcean token", rf"(?<!{_ALNUM})do[opr]_v1_[a-f0-9]{{64}}{_WORD_END}", ["_v1_"]),
    _own("Databricks token", rf"{_at('dapi', _ALNUM)}[a-f0-9]{{32}}(?:-[0-9]+)?{_WORD_END}", ["dapi"]),
    _own("HashiCorp Vault token", rf"{_at('hv')}[sbr]\.[A-Za-z0-9_-]{{60,}}", ["hvs.", "hvb.", "hvr."]),
    _own("Terraform Cloud token", r"\b[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=-]{60,}", ["atlasv1"]),
    _own("Heroku API key", r"HRKU-[A-Za-z0-9_-]{30,}", ["hrku-"]),
    _own("Fly.io token", rf"{_at('fo1_')}[A-Za-z0-9_-]{{40,}}", ["fo1_"]),
    _own("Render API key", rf"{_at('rnd_', _ALNUM)}[A-Za-z0-9]{{32,}}{_WORD_END}", ["rnd_"]),
    _own("Supabase key", rf"{_at('sbp_', _ALNUM)}[a-f0-9]{{40}}{_WORD_END}", ["sbp_"]),
    _own("Supabase key", r"sb_secret_[A-Za-z0-9_-]{20,}", ["sb_secret_"]),
    _own("PlanetScale token", r"pscale_(?:tkn|pw|oauth)_[A-Za-z0-9_=.-]{32,}", ["pscale_"]),
    _own("Pulumi access token", rf"{_at('pul-', _ALNUM)}[a-f0-9]{{40}}{_WORD_END}", ["pul-"]),
    _own("Doppler token", rf"{_at('dp.')}(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{{40,}}", ["dp."]),
    _own("1Password service account token", r"ops_eyJ[A-Za-z0-9_-]{100,}={0,2}", ["ops_eyj"]),
    _own("age secret key", r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}", ["age-secret-key-1"]),
    # --- code hosts and package registries ------------------------------------------------------
    _own(
        "GitHub token",
        rf"(?:gh[pousr]_[A-Za-z0-9]{{36,}}|github_pat_[A-Za-z0-9_]{{50,}}){_WORD_END}",
        ["ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"],
    ),
    _library("GitHub token", GitHubTokenDetector, 0, ["ghp_", "gho_", "ghu_", "ghs_", "ghr_"], before=""),
    *(
        _library("GitLab token", GitLabTokenDetector, index, _GITLAB_PREFIXES, before="")
        for index in range(len(GitLabTokenDetector.denylist))
    ),
    # Routable GitLab tokens end in ".<version>.<checksum>"; feature-flag client tokens glffct-.
    _own(
        "GitLab token",
        r"gl(?:pat|dt|ft|soat|rt|cbt|imt|ptt|agent|oas|ffct)-[A-Za-z0-9_-]{20,}(?:\.[A-Za-z0-9_-]+){0,3}",
        [*_GITLAB_PREFIXES, "glffct-"],
    ),
    _own("Bitbucket app password", rf"{_at('ATBB', _ALNUM)}[A-Za-z0-9]{{32,}}{_WORD_END}", ["atbb"], accept=_not_env_name),
    _own("Atlassian API token", r"AT(?:ATT|CTT)3[A-Za-z0-9_=-]{50,}", ["atatt3", "atctt3"], accept=_not_env_name),
    _own("Azure DevOps token", r"\b[A-Za-z0-9]{76}AZDO[A-Za-z0-9]{4}\b", ["azdo"], accept=_not_env_name),
    _own("Docker Hub token", r"dckr_(?:pat|oat)_[A-Za-z0-9_-]{27,}", ["dckr_"]),
    _own("npm token", rf"{_at('npm_', _ALNUM)}[A-Za-z0-9]{{36}}{_WORD_END}", ["npm_"]),
    _own(
        "npm token",
        r"_authToken\s*=\s*[\"']?([^\s\"'`\\{}\[\](),;<>]+)",
        ["_authtoken"],
        group=1,
        accept=_not_placeholder,
    ),
    _library("PyPI token", PypiTokenDetector, 0, ["pypi-"], before=_ALNUM),
    _library("PyPI token", PypiTokenDetector, 1, ["pypi-"], before=_ALNUM),
    _own("RubyGems API key", r"rubygems_[a-f0-9]{48}", ["rubygems_"]),
    _own("crates.io token", rf"{_at('cio', _ALNUM)}[A-Za-z0-9]{{32}}{_WORD_END}", ["cio"]),
    _own("NuGet API key", rf"{_at('oy2', _ALNUM)}[a-z0-9]{{43}}{_WORD_END}", ["oy2"]),
    _own("Sourcegraph token", rf"sgp_(?:[a-f0-9]{{16}}_|local_)?[a-f0-9]{{40}}{_WORD_END}", ["sgp_"]),
    _own("Netlify token", rf"{_at('nfp_', _ALNUM)}[A-Za-z0-9]{{36,}}{_WORD_END}", ["nfp_"]),
    _own("Linear API key", rf"lin_api_[A-Za-z0-9]{{40}}{_WORD_END}", ["lin_api_"]),
    _own("Postman API key", r"PMAK-[a-f0-9]{24}-[a-f0-9]{34}", ["pmak-"]),
    _own("Figma token", r"figd_[A-Za-z0-9_-]{40,}", ["figd_"]),
    _own("Grafana token", rf"{_at('glc_')}[A-Za-z0-9+/]{{32,}}={{0,2}}", ["glc_"]),
    _own("Grafana token", r"glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}", ["glsa_"]),
    _own("Sentry token", r"sntry[su]_[A-Za-z0-9+/=_-]{40,}", ["sntrys_", "sntryu_"]),
    # --- messaging, payments, SaaS -------------------------------------------------------------
    _library("Slack token", SlackDetector, 0, ["xox"]),
    _library("Slack webhook URL", SlackDetector, 1, ["hooks.slack.com"]),
    _own(
        "Slack token",
        r"(?:xox(?:[abposre]|e\.xox[bp])-[0-9]+-|xapp-[0-9]-)[A-Za-z0-9-]{8,}",
        ["xox", "xapp-"],
        ci=True,
    ),
    _own(
        "Slack webhook URL",
        rf"{_at('https://hooks.slack.com/')}(?:services|workflows|triggers)/[A-Za-z0-9_/-]{{16,}}",
        ["hooks.slack.com"],
        ci=True,
    ),
    _own("Stripe secret key", rf"[rs]k_(?<!{_ALNUM}[rs]k_)(?:live|test)_[0-9A-Za-z]{{16,}}{_WORD_END}", ["k_live_", "k_test_"]),
    _library("Stripe secret key", StripeDetector, 0, ["k_live_"], before=_ALNUM),
    _own("Stripe webhook secret", rf"{_at('whsec_', _ALNUM)}[A-Za-z0-9+/=]{{24,}}", ["whsec_"]),
    _own("Shopify token", rf"{_at('shp', _ALNUM)}(?:at|ca|pa|ss)_[a-fA-F0-9]{{32}}{_WORD_END}", ["shp"]),
    _library("SendGrid API key", SendGridDetector, 0, ["sg."]),
    _library("Twilio API key", TwilioKeyDetector, 0, ["ac"]),
    _library("Twilio API key", TwilioKeyDetector, 1, ["sk"]),
    _library("Mailchimp API key", MailchimpDetector, 0, ["-us"]),
    _own("Mailgun API key", rf"{_at('key-', _ALNUM)}[0-9a-f]{{32}}{_WORD_END}", ["key-"]),
    _own(
        "Notion token",
        rf"(?:{_at('ntn_', _ALNUM)}[A-Za-z0-9]{{40,}}|{_at('secret_', _ALNUM)}[A-Za-z0-9]{{43}}){_WORD_END}",
        ["ntn_", "secret_"],
    ),
    _own("New Relic API key", r"NRAK-[A-Z0-9]{27}", ["nrak-"]),
    _own("Dynatrace token", r"dt0c01\.[A-Z0-9]{24}\.[A-Z0-9]{64}", ["dt0c01."]),
    _own("Mapbox secret token", rf"{_at('sk.eyJ')}[A-Za-z0-9_-]{{20,}}\.[A-Za-z0-9_-]{{20,}}", ["sk.eyj"]),
    _own("Contentful token", r"CFPAT-[A-Za-z0-9_-]{43}", ["cfpat-"]),
    _library("Discord bot token", DiscordBotTokenDetector, 0, ["."]),
    _own(
        "Discord webhook URL",
        rf"{_at('https://')}(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/[0-9]+/([A-Za-z0-9_-]{{60,}})",
        ["/api/webhooks/"],
        ci=True,
        group=1,
    ),
    _library("Telegram bot token", TelegramBotTokenDetector, 0, [":"]),
    _library("Square OAuth secret", SquareOAuthDetector, 0, ["sq0csp-"]),
    _own("Square access token", rf"{_at('sq0atp-')}[0-9A-Za-z_-]{{22}}{_TOKEN_END}", ["sq0atp-"]),
    # --- generic formats ------------------------------------------------------------------------
    _own(
        "JSON Web Token",
        rf"{_at('eyJ')}[A-Za-z0-9_-]{{8,}}={{0,2}}\.eyJ[A-Za-z0-9_-]{{8,}}={{0,2}}\.[A-Za-z0-9_+/=-]*",
        ["eyj"],
    ),
    # The library regex stops before the signature; the extension below redacts it too.
    _Shape(
        "JSON Web Token",
        re.compile(rf"{_at('eyJ')}(?:{JwtTokenDetector.denylist[0].pattern[3:]})[A-Za-z0-9_+/=-]*", re.ASCII),
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
        _library("Private key", PrivateKeyDetector, index, ["private key", "putty-user-key-file"], bounded=False)
        for index in range(len(PrivateKeyDetector.denylist))
    ),
    _own("Private key", rf"{_at('PuTTY-User-Key-File-')}[23]:", ["putty-user-key-file"], ci=True),
    _own(
        "URL with embedded password",
        r"://[^\s:/?#@'\"<>\\]+:([^\s/?#@'\"<>\\]+)@",
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

#: Which table rows each needle wakes, every needle once.
_ROWS_BY_NEEDLE: dict[str, tuple[int, ...]] = {}
for _row, _shape in enumerate(_SHAPES):
    for _needle in _shape.needles:
        _ROWS_BY_NEEDLE[_needle] = (*_ROWS_BY_NEEDLE.get(_needle, ()), _row)
_ALWAYS: frozenset[int] = frozenset(row for row, shape in enumerate(_SHAPES) if not shape.needles)
#: Needles of one or two characters occur in almost every text and are found at once with ``in``;
#: the others are found in one pass of an Aho-Corasick automaton over the lower-cased text (one
#: scan whatever the number of shapes, instead of one substring search per needle).
_SHORT_NEEDLES = tuple(needle for needle in _ROWS_BY_NEEDLE if len(needle) <= 2)
_NEEDLE_AUTOMATON = ahocorasick.Automaton()
for _needle in _ROWS_BY_NEEDLE:
    if len(_needle) > 2:
        _NEEDLE_AUTOMATON.add_word(_needle, _needle)
_NEEDLE_AUTOMATON.make_automaton()
#: Exact secret values sort after every shape row (they name no kind).
_VALUE_ROW = len(_SHAPES)
del _row, _shape, _needle


def _rows_for(lowered: str) -> list[int]:
    """The table rows whose needles occur in ``lowered`` (plus the rows without needles), in order."""
    present = {needle for _, needle in _NEEDLE_AUTOMATON.iter(lowered)}
    present.update(needle for needle in _SHORT_NEEDLES if needle in lowered)
    rows = set(_ALWAYS)
    for needle in present:
        rows.update(_ROWS_BY_NEEDLE[needle])
    return sorted(rows)


# Example variable names for the error message, by kind; anything else suggests OPENAI_API_KEY.
_ENV_EXAMPLES = {
    "Anthropic API key": "ANTHROPIC_API_KEY",
    "OpenRouter API key": "OPENROUTER_API_KEY",
    "AWS access key ID": "AWS_ACCESS_KEY_ID",
    "AWS secret access key": "AWS_SECRET_ACCESS_KEY",
    "AWS Bedrock API key": "AWS_BEARER_TOKEN_BEDROCK",
    "Google API key": "GEMINI_API_KEY",
    "GitHub token": "GITHUB_TOKEN",
    "GitLab token": "GITLAB_TOKEN",
    "Hugging Face token": "HF_TOKEN",
    "Groq API key": "GROQ_API_KEY",
    "xAI API key": "XAI_API_KEY",
    "Perplexity API key": "PERPLEXITY_API_KEY",
    "Together AI API key": "TOGETHER_API_KEY",
    "Fireworks AI API key": "FIREWORKS_API_KEY",
    "Cerebras API key": "CEREBRAS_API_KEY",
    "NVIDIA API key": "NVIDIA_API_KEY",
    "URL with embedded password": "DATABASE_URL",
}
_DEFAULT_ENV_EXAMPLE = "OPENAI_API_KEY"

# A span of the original text: (start, end, table row or _VALUE_ROW, replaced by a quoted
# redaction because it is a JSON scalar, how far the match read: >= end for a clipped token).
_Span = tuple[int, int, int, bool, int]


def _clip_token(text: str, match: re.Match[str]) -> tuple[int, int] | None:
    """The span of a clipped shape's match: from its start (or, when the token opens with a
    quote or bracket, from the token itself) to the last word character before the first
    quote, bracket, comma, semicolon or backslash of the token. None when nothing is left."""
    token_start, end = match.span(1)
    start = match.start()
    position = token_start
    while position < end and _TOKEN_STOP.match(text, position):
        position += 1
    if position > token_start:
        start = token_start = position
    stop = _TOKEN_STOP.search(text, token_start, end)
    if stop is not None:
        end = stop.start()
    while end > token_start and not (text[end - 1].isascii() and (text[end - 1].isalnum() or text[end - 1] == "_")):
        end -= 1
    if end <= token_start:
        return None
    return start, end


def _shape_spans(text: str) -> list[tuple[int, int, int, int]]:
    """``(start, end, row, reach)`` of every shape of the table found in ``text``, read as it is
    (``reach``: where the match itself ended, past ``end`` when a token was clipped)."""
    found: list[tuple[int, int, int, int]] = []
    for row in _rows_for(text.lower()):
        shape = _SHAPES[row]
        for match in shape.pattern.finditer(text):
            if shape.clip:
                span = _clip_token(text, match)
                if span is None:
                    continue
                start, end = span
            else:
                start, end = match.span(shape.group)
            if start < 0 or start == end:
                continue
            if shape.accept is not None and not shape.accept(text[start:end]):
                continue
            found.append((start, end, row, max(end, match.end())))
    return found


def _value_spans(text: str, values: tuple[str, ...]) -> list[tuple[int, int]]:
    """Every occurrence of each exact value, and of each known piece of the long ones."""
    spans: list[tuple[int, int]] = []
    for value in values:
        index = text.find(value)
        while index != -1:
            spans.append((index, index + len(value)))
            index = text.find(value, index + 1)
        spans.extend(_fragment_spans(text, value))
    return spans


def _scan_text(text: str, view: View | None, values: tuple[str, ...]) -> list[_Span]:
    """Shapes and values in ``text`` (``view.text``, or the original when ``view`` is None), as
    it is and folded (NFKC, ignorable characters removed), mapped back to the original."""
    spans: list[_Span] = []
    layers: list[tuple[str, View | None]] = [(text, view)]
    folded = normalized_view(text, parent=view)
    if folded is not None:
        layers.append((folded.text, folded))
    for layer_text, layer in layers:
        for start, end, row, reach in _shape_spans(layer_text):
            if layer is not None:
                reach = layer.span(start, reach)[1]
                start, end = layer.span(start, end)
            spans.append((start, end, row, False, reach))
        for start, end in _value_spans(layer_text, values):
            if layer is not None:
                start, end = layer.span(start, end)
            spans.append((start, end, _VALUE_ROW, False, end))
    return spans


def _scan(text: str, values: tuple[str, ...]) -> list[_Span]:
    """Every secret span of ``text``: shapes and exact ``values``, read through JSON escapes and
    Unicode look-alikes. Where ``text`` is JSON (whole, or NDJSON lines) every span lies inside
    one string literal's content, or is a whole scalar token holding a value (``quoted``)."""
    if not text:
        return []
    documents: list[tuple[int, int]] | None = None
    decoded: View | None = None
    if "\\" in text:
        documents = json_documents(text)
        decoded = json_view(text, documents) if documents else None
    spans = _scan_text(decoded.text if decoded is not None else text, decoded, values)
    if not spans:
        return spans
    if documents is None:
        documents = json_documents(text)
    if documents:
        spans = _inside_json(text, documents, spans, values)
    return spans


def _inside_json(text: str, documents: list[tuple[int, int]], spans: list[_Span], values: tuple[str, ...]) -> list[_Span]:
    """``spans`` made to respect the JSON ``documents`` of ``text``.

    A span inside one string literal's content stays. A span that leaves its literal (an
    open-ended pattern running past the closing quote, a match across two literals) is dropped
    and every literal it touched is scanned again on its own (decoded), so what is redacted is
    the secret inside the string and nothing else; a value span over a number, ``true``,
    ``false`` or ``null`` replaces that whole token with a quoted redaction. Parts of a span
    outside every document (plain lines between NDJSON lines) stay.
    """
    kept: list[_Span] = []
    rescan: set[tuple[int, int]] = set()
    quoted: set[tuple[int, int]] = set()
    cache: dict[int, tuple[list[tuple[int, int]], list[int]]] = {}
    starts = [start for start, _ in documents]

    def literals_of(index: int) -> tuple[list[tuple[int, int]], list[int]]:
        if index not in cache:
            found = literal_spans(text, *documents[index])
            cache[index] = (found, [end for _, end in found])
        return cache[index]

    for span in spans:
        start, end, row, _, reach = span
        reach = max(end, reach)
        first = max(bisect_right(starts, start) - 1, 0)
        overlapping = []
        for index in range(first, len(documents)):
            if documents[index][0] >= reach:
                break
            if documents[index][1] > start:
                overlapping.append(index)
        if not overlapping:
            kept.append(span)
            continue
        if len(overlapping) == 1:
            found, ends = literals_of(overlapping[0])
            index = bisect_right(ends, start)  # the first literal ending after the span starts
            if index < len(found) and found[index][0] < start and reach < found[index][1]:
                kept.append(span)
                continue
        position = start
        for document in overlapping:
            document_start, document_end = documents[document]
            if position < min(document_start, end):
                kept.append((position, min(document_start, end), row, False, min(document_start, end)))
            low, high = max(start, document_start), min(reach, document_end)
            found, ends = literals_of(document)
            index = bisect_right(ends, low)
            gap_start = found[index - 1][1] if index > 0 else document_start
            while index < len(found) and found[index][0] < high:
                if row == _VALUE_ROW:
                    _quote_scalars(text, gap_start, found[index][0], low, high, quoted)
                rescan.add(found[index])
                gap_start = found[index][1]
                index += 1
            if row == _VALUE_ROW:
                _quote_scalars(text, gap_start, found[index][0] if index < len(found) else document_end, low, high, quoted)
            position = document_end
        if position < end:
            kept.append((position, end, row, False, end))
    for literal_start, literal_end in sorted(rescan):
        raw = text[literal_start + 1 : literal_end - 1]
        content = literal_view(raw) if "\\" in raw else None
        offset = literal_start + 1
        for start, end, row, _, reach in _scan_text(content.text if content is not None else raw, content, values):
            kept.append((start + offset, end + offset, row, False, reach + offset))
    kept.extend((start, end, _VALUE_ROW, True, end) for start, end in quoted)
    return kept


def _quote_scalars(text: str, gap_start: int, gap_end: int, low: int, high: int, quoted: set[tuple[int, int]]) -> None:
    if gap_start >= high or gap_end <= low:
        return
    for start, end in scalar_spans(text, gap_start, gap_end):
        if start < high and end > low:
            quoted.add((start, end))


#: Texts up to this many characters have their scan remembered (``_REMEMBERED`` of the most
#: recent ones): an observation's keys, check ids, event names and a candidate's configuration
#: are the same strings execution after execution, and a scan costs tens of µs whatever the
#: length of the text. Results depend only on the text and the values looked for.
_REMEMBERED_TEXT_LENGTH = 2048
_REMEMBERED = 16384


def find_secrets(text: str) -> list[SecretFinding]:
    """Secret-shaped spans of ``text``: non-overlapping, sorted by ``start``.

    Shapes are matched in the text as it is and as a person reads it: JSON string escapes
    decoded, compatibility forms folded (NFKC: a full-width ``ｓｋ－…`` is ``sk-…``), invisible
    (default-ignorable) characters removed and hyphen look-alikes read as ``-``; offsets are
    always the original text's. In a JSON text (whole, or NDJSON lines) a finding never leaves
    the string literal it is in.

    Overlapping matches (a JWT inside a ``Bearer`` header, the PEM header inside its block) are
    merged into one finding covering both; its ``kind`` is that of the longest match (ties go
    to the earlier row of the shape table). For URLs only the password is the finding.
    """
    if len(text) <= _REMEMBERED_TEXT_LENGTH:
        return list(_remembered_findings(text))
    return _find_secrets(text)


@functools.lru_cache(maxsize=_REMEMBERED)
def _remembered_findings(text: str) -> tuple[SecretFinding, ...]:
    return tuple(_find_secrets(text))


def _find_secrets(text: str) -> list[SecretFinding]:
    raw = [(start, end, row) for start, end, row, _, _ in _scan(text, ()) if row < _VALUE_ROW]
    if not raw:
        return []
    raw.sort(key=lambda item: (item[0], -item[1], item[2]))
    findings: list[SecretFinding] = []
    start, end, row = raw[0]
    kind = _SHAPES[row].kind
    best = (end - start, -row)
    for next_start, next_end, next_row in raw[1:]:
        if next_start < end:  # overlaps the current cluster
            end = max(end, next_end)
            score = (next_end - next_start, -next_row)
            if score > best:
                best, kind = score, _SHAPES[next_row].kind
            continue
        findings.append(SecretFinding(kind, start, end))
        start, end, kind = next_start, next_end, _SHAPES[next_row].kind
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


def _has_secret(text: str) -> bool:
    """``bool(find_secrets(text))``, without copying the remembered findings into a list."""
    if len(text) <= _REMEMBERED_TEXT_LENGTH:
        return bool(_remembered_findings(text))
    return bool(_find_secrets(text))


def contains_secret(value: object) -> bool:
    """Whether ``value`` (a ``str`` or JSON-like data, dict keys included) holds a secret shape.

    Non-``str`` scalars (numbers, booleans, ``None``) are ignored.
    """
    # The strings of :func:`_strings`, in any order (only whether one holds a secret matters):
    # every row loaded from a model that refuses secrets is walked so (evalhub/validation.py).
    stack: list[object] = [value]
    seen: set[int] = set()
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if _has_secret(item):
                return True
        elif isinstance(item, (dict, list, tuple, set, frozenset)):
            if id(item) in seen:  # a self-referencing structure
                continue
            seen.add(id(item))
            if isinstance(item, dict):
                stack.extend(item)
                stack.extend(item.values())
            else:
                stack.extend(item)
    return False


def secret_kinds(value: object) -> list[str]:
    """Distinct kinds of secret found in ``value`` (walked like ``contains_secret``), in order
    of first appearance. For messages: kinds are fixed labels, never parts of the value."""
    if not contains_secret(value):  # the common case, answered by the quicker walk
        return []
    kinds: list[str] = []
    for text in _strings(value):
        for finding in find_secrets(text):
            if finding.kind not in kinds:
                kinds.append(finding.kind)
    return kinds


def _prepare_extra_values(extra_values: Iterable[str]) -> tuple[str, ...]:
    given = tuple(extra_values)
    try:
        return _prepared_values(given)
    except TypeError:  # an unhashable item (never a value to look for): prepare without remembering
        return _prepared_values.__wrapped__(given)


@functools.lru_cache(maxsize=256)
def _prepared_values(extra_values: tuple[str, ...]) -> tuple[str, ...]:
    values: set[str] = set()
    for value in extra_values:
        if not isinstance(value, str):
            continue
        # An environment value read with its trailing newline still matches the bare value, and
        # a value is also looked for as the folded text reads it (NFKC, ignorables removed).
        stripped = value.strip()
        for candidate in (value, stripped, fold_text(value), fold_text(stripped)):
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
    if len(text) <= _REMEMBERED_TEXT_LENGTH:
        return _remembered_redaction(text, extra_values)
    return _redact_text(text, extra_values)


@functools.lru_cache(maxsize=_REMEMBERED)
def _remembered_redaction(text: str, extra_values: tuple[str, ...]) -> str:
    return _redact_text(text, extra_values)


def _redact_text(text: str, extra_values: tuple[str, ...]) -> str:
    spans = sorted((start, end, quoted) for start, end, _, quoted, _ in _scan(text, extra_values))
    if not spans:
        return text
    pieces: list[str] = []
    position = 0
    current_start, current_end, current_quoted = spans[0]
    for start, end, quoted in spans[1:]:
        if start < current_end:
            current_end = max(current_end, end)
            current_quoted = current_quoted or quoted
            continue
        pieces.extend((text[position:current_start], QUOTED_REDACTION if current_quoted else REDACTION))
        position = current_end
        current_start, current_end, current_quoted = start, end, quoted
    pieces.extend((text[position:current_start], QUOTED_REDACTION if current_quoted else REDACTION, text[current_end:]))
    return "".join(pieces)


def redact(text: str, *, extra_values: Iterable[str] = ()) -> str:
    """``text`` with every secret-shaped span replaced by ``REDACTION``.

    ``extra_values`` are exact secret values (e.g. the values of a candidate's required
    environment variables): every occurrence of each one of at least 4 characters is replaced
    as well, longest first, whether or not it looks like a secret, and so is every run of
    ``FRAGMENT_LENGTH`` or more characters of a value of ``FRAGMENT_MIN_VALUE_LENGTH`` or more
    (a key split across two streamed chunks). Overlapping spans become a single ``REDACTION``.

    The secret is replaced and nothing else: where ``text`` is JSON (one document, or NDJSON
    lines) the result is JSON with the same structure and keys — a redaction never leaves the
    string literal it is in, escape sequences are never cut, and a number, ``true``, ``false`` or
    ``null`` that holds a known value becomes the string ``"[REDACTED]"``. Elsewhere an open-ended
    token (``Bearer …``) ends at the first quote, bracket, comma, semicolon or backslash.
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


def redactor(*, extra_values: Iterable[str] = ()) -> Callable[[str], str]:
    """``redact`` of one text with ``extra_values`` prepared once, for the many strings of one
    document (a walk of its own, as :func:`redact_data` walks)."""
    prepared = _prepare_extra_values(extra_values)
    return lambda text: _redact(text, prepared)


def redact_data(value: _T, *, extra_values: Iterable[str] = ()) -> _T:
    """A deep copy of JSON-like ``value`` (dicts, lists, tuples) with every ``str`` — dict keys
    included — passed through ``redact``. Other values are returned unchanged. If two keys
    redact to the same text, the later one gets a " (2)" suffix rather than overwriting."""
    return _redact_value(value, _prepare_extra_values(extra_values))


def env_example(kinds: list[str]) -> str:
    """The environment variable name to suggest instead of a secret of the first of ``kinds``."""
    return _ENV_EXAMPLES.get(kinds[0], _DEFAULT_ENV_EXAMPLE) if kinds else _DEFAULT_ENV_EXAMPLE
