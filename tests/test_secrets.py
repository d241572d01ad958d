"""Secret-shaped data is found, refused and redacted (docs/failure-modes.md B8 and B12).

Every secret here is synthetic and assembled by concatenation, so this file does not itself
carry key-shaped literals for scanners to trip over.
"""

from __future__ import annotations

import base64
import json
import logging
import re
import time

import pytest
from django.conf import settings
from django.core.exceptions import ValidationError

if not settings.configured:  # run without pytest-django: lazy messages need settings
    settings.configure(USE_I18N=False)

from evalhub.logging import RedactSecretsFilter
from evalhub.secrets import (
    REDACTION,
    SecretFinding,
    contains_secret,
    find_secrets,
    redact,
    redact_data,
    secret_kinds,
)
from evalhub.validation import secret_error_for, validate_no_secrets

pytestmark = pytest.mark.database_free

# --- synthetic secrets --------------------------------------------------------------------

# docs/failure-modes.md B12 (d): exact strings.
B12_OPENAI = "sk-" + "proj-" + "FAKEfakeFAKE_0123456789-abcdefghijklmnop"
B12_JWT = "eyJhbGciOiJIUzI1NiJ9" + "." + "eyJzdWIiOiJ4In0" + "." + "c2lnbmF0dXJl"
B12_BEARER = "Bearer " + B12_JWT
B12_AWS = "AKIA" + "IOSFODNN7EXAMPLE"
# docs/failure-modes.md B8 (d): a value where a name belongs.
B8_OPENAI = "sk-" + "proj-" + "FAKE0123456789abcdefghij"

ALNUM = "A1b2"
HEX = "0123456789abcdef"


def pem(kind: str = "RSA", *, end: bool = True, newline: str = "\n") -> str:
    body = newline.join(["MIIEow" + "IBAAKCAQEA" + ALNUM * 12, ALNUM * 16, "Zm9vYmFy" + ALNUM * 6 + "=="])
    text = f"-----BEGIN {kind} PRIVATE KEY-----{newline}{body}{newline}"
    return text + (f"-----END {kind} PRIVATE KEY-----" if end else "")


def jwt_with_array_payload() -> str:
    header = base64.urlsafe_b64encode(b'{"alg":"HS256"}').decode().rstrip("=")
    payload = base64.urlsafe_b64encode(b"[1,2,3]").decode().rstrip("=")  # not eyJ…
    return f"{header}.{payload}." + "c2lnbmF0dXJl" + "X" * 8


# (kind, secret) — the secret is exactly the text that must disappear.
POSITIVES: list[tuple[str, str]] = [
    ("OpenAI API key", "sk-" + ALNUM * 5),
    ("OpenAI API key", "SK-" + ALNUM * 5),
    ("OpenAI API key", B12_OPENAI),
    ("OpenAI API key", B8_OPENAI),
    ("OpenAI API key", "sk-" + "svcacct-" + ALNUM * 6 + "_-" + ALNUM * 4),
    # The reference shape behind labels (a value tried in every form and reflected unscrubbed).
    ("OpenAI API key", "sk-" + "live-" + ALNUM * 5),
    ("OpenAI API key", "sk-" + "test-" + ALNUM * 4),
    ("OpenAI API key", "sk-" + "org-prod-" + ALNUM * 4),
    ("OpenAI API key", "sk-" + ALNUM * 5 + "T3Blbk" + "FJ" + ALNUM * 5),
    ("Anthropic API key", "sk-" + "ant-api03-" + "Ab1_" * 20 + "-Xy9AA"),
    ("Anthropic API key", "SK-" + "ANT-API03-" + "AB1_" * 20),
    ("OpenRouter API key", "sk-" + "or-v1-" + HEX * 4),
    ("Bearer token", B12_BEARER),
    ("Bearer token", "bearer " + "abc123XYZ.~+/" * 2 + "z"),
    ("Bearer token", "BEARER\t" + ALNUM * 5),
    ("Bearer token", "Bearer\u00a0" + ALNUM * 5),
    ("AWS access key ID", B12_AWS),
    ("AWS access key ID", "ASIA" + "Q2WE3RT4YU5IO6PA"),
    ("Google API key", "AIza" + "Sy" + (ALNUM + "_-") * 5 + "ABC"),
    ("Google OAuth client secret", "GOCSPX-" + ALNUM * 7),
    ("Google OAuth access token", "ya29." + ALNUM * 8),
    ("GitHub token", "ghp_" + ALNUM * 9),
    ("GitHub token", "ghs_" + ALNUM * 9),
    ("GitHub token", "github_pat_" + "11" + ALNUM * 5 + "_" + ALNUM * 15),
    ("GitLab token", "glpat-" + ALNUM * 5),
    ("Slack token", "xoxb-" + "1234567890-1234567890123-" + "AbCdEf" * 4),
    ("Slack token", "xapp-1-" + "A0123456789-1234567890123-" + "ab12" * 16),
    ("Slack webhook URL", "https://hooks.slack.com/services/" + "T0000AAAA/B0000BBBB/" + "X1y2" * 6),
    ("Stripe secret key", "sk_" + "live_" + ALNUM * 6),
    ("Stripe secret key", "rk_" + "test_" + ALNUM * 25),
    ("Stripe webhook secret", "whsec_" + ALNUM * 8),
    ("Hugging Face token", "hf_" + "AbCd" * 8 + "Ef"),
    ("Groq API key", "gsk_" + ALNUM * 13),
    ("xAI API key", "xai-" + ALNUM * 20),
    ("xAI API key", "XAI-" + ALNUM * 20),
    ("Perplexity API key", "pplx-" + ALNUM * 12),
    ("Replicate API token", "r8_" + ALNUM * 9 + "C"),
    ("npm token", "npm_" + ALNUM * 9),
    ("PyPI token", "pypi-" + "AgEIcHlwaS5vcmc" + ALNUM * 18),
    ("DigitalOcean token", "dop_" + "v1_" + HEX * 4),
    ("Databricks token", "dapi" + HEX * 2),
    ("Shopify token", "shpat_" + HEX * 2),
    ("Azure storage account key", "AccountKey=" + ALNUM * 22),
    ("SendGrid API key", "SG." + ALNUM * 5 + "Cd" + "." + (ALNUM * 11)[:43]),
    ("Twilio API key", "SK" + HEX * 2),
    ("Mailchimp API key", HEX * 2 + "-us12"),
    ("Discord bot token", "M" + ALNUM * 6 + "." + "Ab1_-2" + "." + (ALNUM * 7)[:27]),
    ("Telegram bot token", "123456789:" + (ALNUM * 9)[:35]),
    ("Square OAuth secret", "sq0csp-" + (ALNUM * 11)[:43]),
    ("Square access token", "sq0atp-" + (ALNUM * 6)[:22]),
    ("JSON Web Token", B12_JWT),
    ("JSON Web Token", jwt_with_array_payload()),
    ("Private key", pem()),
    ("Private key", pem("OPENSSH", end=False)),
    ("Private key", pem("EC", newline="\\n")),  # as it appears inside JSON text
    ("Private key", pem().lower()),
    # Current formats of model providers, clouds, code hosts and package registries.
    ("Anthropic API key", "sk-" + "ant-oat01-" + ALNUM * 10),
    ("OpenAI API key", "sk-" + "admin-" + ALNUM * 6),
    ("Google OAuth refresh token", "1//0" + (ALNUM + "_-") * 8),
    ("Together AI API key", "tgp_" + "v1_" + ALNUM * 11),
    ("Fireworks AI API key", "fw_" + ALNUM * 6),
    ("Cerebras API key", "csk-" + "a1b2" * 12),
    ("NVIDIA API key", "nvapi-" + (ALNUM + "_-") * 11),
    ("AWS Bedrock API key", "ABSK" + "QmVkcm9ja0FQSUtleS" + ALNUM * 12),
    ("AWS Bedrock API key", "bedrock-" + "api-key-" + "YmVkcm9jay5hbWF6b25hd3MuY29t" + ALNUM * 4),
    ("LangSmith API key", "lsv2_" + "pt_" + HEX * 2 + "_" + HEX[:10]),
    ("Pinecone API key", "pcsk_" + ALNUM * 10 + "_" + ALNUM * 4),
    ("ElevenLabs API key", "sk_" + HEX * 3),
    ("Anyscale API key", "esecret_" + ALNUM * 6),
    ("HashiCorp Vault token", "hvs." + ALNUM * 24),
    ("Terraform Cloud token", ALNUM * 3 + "A1" + ".atlasv1." + ALNUM * 16),
    ("Heroku API key", "HRKU-" + ALNUM * 8),
    ("Fly.io token", "fo1_" + ALNUM * 11),
    ("Render API key", "rnd_" + ALNUM * 8),
    ("Supabase key", "sbp_" + HEX * 2 + "01234567"),
    ("Supabase key", "sb_" + "secret_" + ALNUM * 6),
    ("PlanetScale token", "pscale_" + "tkn_" + ALNUM * 8),
    ("Pulumi access token", "pul-" + HEX * 2 + "01234567"),
    ("Doppler token", "dp." + "pt." + ALNUM * 11),
    ("1Password service account token", "ops_" + "eyJ" + ALNUM * 26),
    ("age secret key", "AGE-SECRET-" + "KEY-1" + "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L"[:29] * 2),
    ("GitLab token", "glpat-" + ALNUM * 7 + ".01.0z1a2b3c"),
    ("GitLab token", "glffct-" + ALNUM * 6),
    ("Bitbucket app password", "ATBB" + ALNUM * 8),
    ("Atlassian API token", "ATATT3" + "xFfGF0" + (ALNUM + "_-=") * 8),
    ("Azure DevOps token", ALNUM * 19 + "AZDO" + ALNUM),
    ("Docker Hub token", "dckr_" + "pat_" + ALNUM * 7),
    ("RubyGems API key", "rubygems_" + HEX * 3),
    ("crates.io token", "cio" + ALNUM * 8),
    ("NuGet API key", "oy2" + "a1b2c3" * 7 + "d"),
    ("Sourcegraph token", "sgp_" + HEX + "_" + HEX * 2 + "01234567"),
    ("Netlify token", "nfp_" + ALNUM * 9),
    ("Linear API key", "lin_" + "api_" + ALNUM * 10),
    ("Postman API key", "PMAK-" + HEX + "01234567" + "-" + HEX * 2 + "ab"),
    ("Figma token", "figd_" + ALNUM * 10),
    ("Grafana token", "glc_" + ALNUM * 8),
    ("Grafana token", "glsa_" + ALNUM * 8 + "_" + "0a1b2c3d"),
    ("Sentry token", "sntrys_" + "eyJ" + ALNUM * 10),
    ("Mailgun API key", "key-" + HEX * 2),
    ("Notion token", "ntn_" + ALNUM * 10),
    ("Notion token", "secret_" + ALNUM * 10 + "abc"),
    ("New Relic API key", "NRAK-" + "A1B2C3D4E" * 3),
    ("Dynatrace token", "dt0c01." + "A1B2" * 6 + "." + "A1B2" * 16),
    ("Mapbox secret token", "sk." + "eyJ" + ALNUM * 5 + "." + ALNUM * 6),
    ("Contentful token", "CFPAT-" + (ALNUM * 11)[:43]),
]

# (kind, text as pasted, the key as it reads): copy-paste and obfuscation leave a key a key.
FULLWIDTH = {ord(char): ord(char) + 0xFEE0 for char in "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_"}
B12_GITHUB = "ghp_" + ALNUM * 9
OBFUSCATED: list[tuple[str, str, str]] = [
    ("OpenAI API key", B8_OPENAI.translate(FULLWIDTH), B8_OPENAI),  # full-width compatibility forms
    ("OpenAI API key", "".join(chr(0x1D41A + ord(c) - 97) if "a" <= c <= "z" else c for c in B8_OPENAI), B8_OPENAI),  # math bold
    ("OpenAI API key", B8_OPENAI[:12] + "\u200b" + B8_OPENAI[12:], B8_OPENAI),  # zero-width space inside
    ("OpenAI API key", B8_OPENAI[:12] + "\u2060" + B8_OPENAI[12:], B8_OPENAI),  # word joiner
    ("OpenAI API key", B8_OPENAI[:5] + "\u00ad" + B8_OPENAI[5:], B8_OPENAI),  # soft hyphen
    ("OpenAI API key", B8_OPENAI[:9] + "\ufeff\u200d" + B8_OPENAI[9:], B8_OPENAI),  # BOM and joiner
    ("OpenAI API key", B8_OPENAI.replace("-", "\u2011"), B8_OPENAI),  # non-breaking hyphens
    ("GitHub token", B12_GITHUB[:10] + "\u200c" + B12_GITHUB[10:], B12_GITHUB),
    ("GitHub token", B12_GITHUB.translate(FULLWIDTH), B12_GITHUB),
    ("AWS access key ID", B12_AWS[:8] + "\u200b" + B12_AWS[8:], B12_AWS),
    ("Anthropic API key", ("sk-" + "ant-api03-" + ALNUM * 5).translate(FULLWIDTH), "sk-" + "ant-api03-" + ALNUM * 5),
    ("Bearer token", "Bearer " + B12_JWT[:10] + "\u200b" + B12_JWT[10:], B12_JWT),
]

# (kind, text, the key): a key glued to an identifier, a variable name or a word is still a key.
GLUED: list[tuple[str, str, str]] = [
    ("OpenAI API key", "OPENAI_" + B12_OPENAI, B12_OPENAI),
    ("OpenAI API key", "OPENAI_API_KEY" + B12_OPENAI, B12_OPENAI),
    ("OpenAI API key", "key" + B8_OPENAI, B8_OPENAI),
    ("OpenAI API key", "OPENAI_" + "sk-" + ALNUM * 5, "sk-" + ALNUM * 5),
    ("Anthropic API key", "ANTHROPIC_API_KEY" + "sk-" + "ant-api03-" + ALNUM * 5, "sk-" + "ant-api03-" + ALNUM * 5),
    ("OpenRouter API key", "token" + "sk-" + "or-v1-" + HEX * 4, "sk-" + "or-v1-" + HEX * 4),
    ("GitHub token", "GITHUB_TOKEN" + B12_GITHUB, B12_GITHUB),
    ("GitHub token", "GH_" + B12_GITHUB, B12_GITHUB),
    ("GitLab token", "GITLAB_" + "glpat-" + ALNUM * 5, "glpat-" + ALNUM * 5),
    ("Hugging Face token", "HF_TOKEN_" + "hf_" + "AbCd" * 8 + "Ef", "hf_" + "AbCd" * 8 + "Ef"),
    ("Groq API key", "GROQ" + "gsk_" + ALNUM * 13, "gsk_" + ALNUM * 13),
    ("Google API key", "GEMINI_" + "AIza" + "Sy" + (ALNUM + "_-") * 5 + "ABC", "AIza" + "Sy" + (ALNUM + "_-") * 5 + "ABC"),
]

# (kind, text, secret part): shapes whose finding is only part of the text.
PARTIAL_POSITIVES: list[tuple[str, str, str]] = [
    ("URL with embedded password", "https://user:" + "s3cr3tP4ss" + "@example.com/x", "s3cr3tP4ss"),
    ("URL with embedded password", "postgres://app:" + "hunter2hunter2" + "@db:5432/app", "hunter2hunter2"),
    (
        "HTTP Basic credentials",
        "Authorization: Basic " + base64.b64encode(b"user:pa55word").decode(),
        base64.b64encode(b"user:pa55word").decode(),
    ),
    ("npm token", "//registry.npmjs.org/:_authToken=" + HEX * 2 + "-abcd", HEX * 2 + "-abcd"),
    ("Discord webhook URL", "https://discord.com/api/webhooks/123456789012345678/" + ALNUM * 17, ALNUM * 17),
    ("AWS secret access key", 'aws_secret_access_key = "' + ALNUM * 10 + '"', ALNUM * 10),
    ("IBM COS HMAC secret", 'secret_access_key = "' + HEX * 3 + '"', HEX * 3),
]

NEGATIVES: list[str] = [
    "sk-live-short1234",
    "sk-a-b-c-d-abcdefghijklmnop",
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "OPENROUTER_API_KEY",
    "AWS_SECRET_ACCESS_KEY",
    "GITHUB_TOKEN",
    "GITHUB_PAT_FOR_RELEASES",
    '{"required_env": ["OPENAI_API_KEY", "OPENROUTER_API_KEY"]}',
    "openai api key",
    "openrouter/moonshotai/kimi-k2.5",
    "gpt-5.6-luna",
    "claude-sonnet-5",
    "openai/gpt-5.6-luna@2026-01-01",
    "rwe-453d278ebeaabe66",
    "rwe-0123456789abcdef",
    "eval-rwe-453d278ebeaabe66 attempt-rwe-453d278ebeaabe66 runner-workflow-trace-lineage",
    "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "da39a3ee5e6b4b0d3255bfef95601890afd80709",
    "123e4567-e89b-12d3-a456-426614174000",
    "2025-01-02T03:04:05.123456+00:00",
    "1712345678901",
    "Bearer",
    "Bearer token required",
    "Authorization: Bearer <token>",
    "sk-abc",
    "sk-learn-compatibility-layer",
    "risk-assessment-framework-2025",
    "task-1 AKIA123 eyJ",
    "xoxo-hugs-and-kisses-forever",
    "The password and the secret token are kept in a vault; set OPENAI_API_KEY.",
    "Pass the key via the environment, never the value.",
    "https://platform.openai.com/api-keys",
    "http://localhost:8000/api/results/?page=2",
    "ssh://git@github.com/org/repo.git",
    "https://user@example.com/",
    "postgres://user:${DB_PASSWORD}@db/app",
    "https://user:<password>@example.com/",
    "https://user:****@example.com/",
    "-----BEGIN PUBLIC KEY-----",
    "idempotency_key: rwe-453d278ebeaabe66",
    "",
    # Environment variable NAMES, whatever prefix they start with, in any width.
    "TOGETHER_API_KEY",
    "FIREWORKS_API_KEY",
    "CEREBRAS_API_KEY",
    "NVIDIA_API_KEY",
    "AWS_BEARER_TOKEN_BEDROCK",
    "HF_TOKEN",
    "HUGGING_FACE_HUB_TOKEN",
    "GITLAB_TOKEN",
    "CI_JOB_TOKEN",
    "BITBUCKET_APP_PASSWORD",
    "ATBB_APP_PASSWORD_FOR_THE_BUILD_SERVER_2024_X",
    "ATATT3_TOKEN_NAME_THAT_IS_ONLY_A_VARIABLE_NAME_FOR_THE_TESTS",
    "X" * 76 + "AZDO" + "TEST",
    "AZURE_DEVOPS_EXT_PAT",
    "DOCKER_PAT",
    "NPM_TOKEN",
    "PYPI_API_TOKEN",
    "CARGO_REGISTRY_TOKEN",
    "NUGET_API_KEY",
    "SK_LIVE_STRIPE_KEY",
    "OPENAI_SK_PROJ_KEY",
    "GHP_TOKEN",
    "SECRET_KEY",
    "DJANGO_SECRET_KEY",
    "OPENAI_API_KEY".translate({ord(c): ord(c) + 0xFEE0 for c in "OPENAIAPIKEY_"}),
    "OPENAI\u200b_API_KEY",
    '{"required_env": ["TOGETHER_API_KEY", "FIREWORKS_API_KEY", "GITLAB_TOKEN"]}',
    # Words and ids that merely contain a prefix.
    "social-media-campaign-for-the-precious-glossary-2025",
    "the key-value store keeps keyboard-layout-settings-for-everyone",
    "fw_update_available_for_the_device_firmware",
    "pa-inexpensive-candidate-for-the-long-running-slot-key",
    "sk_learn_compatibility_layer_and_more",
    "dp.pt.example",
    "codex-strong.gpt-5.6-luna",
    "opencode-inexpensive",
]


def windows(secret: str, size: int = 8) -> list[str]:
    """Every ``size``-character piece of ``secret``, minus PEM armour ("BEGIN RSA PRIVATE KEY"
    is public and names the kind)."""
    secret = re.sub(r"-----[^-]*-----", "", secret)
    return [secret[i : i + size] for i in range(max(1, len(secret) - size + 1))]


# --- finding --------------------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "secret"), POSITIVES, ids=[f"{k}-{i}" for i, (k, _) in enumerate(POSITIVES)])
@pytest.mark.parametrize(
    "template",
    ["{}", "Incorrect API key provided: {}.", '{{"error": {{"message": "{}"}}}}', "x={}\nnext line"],
    ids=["bare", "prose", "json", "assignment"],
)
def test_every_shape_is_found_and_redacted(kind: str, secret: str, template: str) -> None:
    text = template.format(secret)

    findings = find_secrets(text)

    assert kind in [finding.kind for finding in findings]
    redacted = redact(text)
    assert REDACTION in redacted
    for part in windows(secret, 12):
        assert part not in redacted


@pytest.mark.parametrize(("kind", "text", "secret"), PARTIAL_POSITIVES, ids=[k for k, _, _ in PARTIAL_POSITIVES])
def test_shapes_with_context_redact_only_the_secret(kind: str, text: str, secret: str) -> None:
    assert secret_kinds(text) == [kind]
    redacted = redact(text)
    assert secret not in redacted
    assert redacted == text.replace(secret, REDACTION)


@pytest.mark.parametrize("text", NEGATIVES)
def test_innocent_data_is_not_flagged(text: str) -> None:
    assert find_secrets(text) == []
    assert redact(text) == text
    assert not contains_secret(text)


def test_b12_strings_are_found_and_redacted_from_a_provider_error() -> None:
    text = (
        "Error code: 401 - {'error': {'message': 'Incorrect API key provided: " + B12_OPENAI + "'}}\n"
        "headers={'Authorization': '" + B12_BEARER + "'}\n" + B12_AWS
    )

    assert [finding.kind for finding in find_secrets(text)] == ["OpenAI API key", "Bearer token", "AWS access key ID"]
    redacted = redact(text)
    for secret in (B12_OPENAI, B12_JWT, B12_AWS):
        assert secret not in redacted
    assert redacted == (
        "Error code: 401 - {'error': {'message': 'Incorrect API key provided: [REDACTED]'}}\n"
        "headers={'Authorization': '[REDACTED]'}\n[REDACTED]"
    )


def test_findings_are_sorted_non_overlapping_and_carry_no_value() -> None:
    text = f"a {B12_AWS} b {B12_BEARER} c " + "ghp_" + ALNUM * 9

    findings = find_secrets(text)

    assert findings == sorted(findings, key=lambda finding: finding.start)
    assert all(left.end <= right.start for left, right in zip(findings, findings[1:], strict=False))
    # The JWT inside the Bearer header is merged into one finding, named after the longer match.
    assert [finding.kind for finding in findings] == ["AWS access key ID", "Bearer token", "GitHub token"]
    assert findings[0] == SecretFinding("AWS access key ID", 2, 22)
    assert set(vars(findings[0])) == {"kind", "start", "end"}


def test_the_reference_regexes_never_find_more_than_we_do() -> None:
    manifest = re.compile(r"\b(?:sk-[A-Za-z0-9]{16,}|Bearer\s+\S{16,}|AKIA[0-9A-Z]{16})\b", re.ASCII)
    observation = re.compile(r"\b(?:sk-[A-Za-z0-9]{16,}|Bearer\s+\S{16,})\b", re.ASCII | re.IGNORECASE)
    texts = (
        [secret for _, secret in POSITIVES]
        + NEGATIVES
        + [
            "SK-" + ALNUM * 4 + "_tail",
            "sk-" + ALNUM * 4 + "é",
            "bearer " + "-" * 15 + "x",
            "x" + B12_AWS,
        ]
    )
    for text in texts:
        covered = {i for finding in find_secrets(text) for i in range(finding.start, finding.end)}
        for regex in (manifest, observation):
            for match in regex.finditer(text):
                assert set(range(*match.span())) <= covered, (regex.pattern, match.span())


@pytest.mark.parametrize(("kind", "text", "key"), OBFUSCATED, ids=[f"{k}-{i}" for i, (k, _, _) in enumerate(OBFUSCATED)])
def test_a_key_in_compatibility_forms_or_with_invisible_characters_is_found(kind: str, text: str, key: str) -> None:
    pasted = f"key: {text} end"

    assert [finding.kind for finding in find_secrets(pasted)] == [kind]
    assert secret_kinds({"note": pasted}) == [kind]
    assert redact(pasted) == "key: [REDACTED] end"
    with pytest.raises(ValidationError, match=kind):
        validate_no_secrets(pasted)
    # Escaped in JSON (\\uXXXX, as Python's json writes non-ASCII), it is found too.
    document = json.dumps({"note": pasted})
    assert json.loads(redact(document)) == {"note": "key: [REDACTED] end"}


@pytest.mark.parametrize(("kind", "text", "key"), GLUED, ids=[f"{k}-{i}" for i, (k, _, _) in enumerate(GLUED)])
def test_a_key_glued_to_a_prefix_is_found(kind: str, text: str, key: str) -> None:
    assert [finding.kind for finding in find_secrets(text)] == [kind]
    assert redact(text) == text.replace(key, REDACTION)


def test_folding_keeps_the_offsets_of_the_original_text() -> None:
    text = "é " + B8_OPENAI.translate(FULLWIDTH) + " ﬁn"

    [finding] = find_secrets(text)

    assert (finding.start, finding.end) == (2, 2 + len(B8_OPENAI))
    assert redact(text) == "é [REDACTED] ﬁn"


def test_bearer_with_a_template_is_flagged_like_the_reference() -> None:
    # The upstream manifest check rejects this too; evalhub config names the variable instead.
    assert secret_kinds("Authorization: Bearer ${OPENAI_API_KEY}") == ["Bearer token"]


def test_shape_inside_a_longer_word_is_not_a_secret() -> None:
    assert find_secrets("X" + B12_AWS) == []
    assert find_secrets("task" + "sk-" + ALNUM * 5) == []
    assert find_secrets("SK" + HEX * 2 + "ff") == []


# --- JSON-like data ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        {"env": {"OPENAI_API_KEY": B12_OPENAI}},
        {B12_OPENAI: "OPENAI_API_KEY"},  # as a dict KEY
        ["OPENAI_API_KEY", [1, 2.5, None, True, {"deep": ("x", B12_AWS)}]],
        [B8_OPENAI],
        json.dumps({"headers": {"Authorization": B12_BEARER}}),
    ],
    ids=["nested-value", "dict-key", "nested-list-tuple", "b8-required-env", "json-text"],
)
def test_json_like_data_is_walked_keys_included(value: object) -> None:
    assert contains_secret(value)
    assert secret_kinds(value)
    with pytest.raises(ValidationError):
        validate_no_secrets(value)


@pytest.mark.parametrize(
    "value",
    [None, 42, 3.5, True, {}, [], ["OPENAI_API_KEY", "ANTHROPIC_API_KEY"], {"model": "gpt-5.6-luna", "n": 3}],
)
def test_clean_data_passes(value: object) -> None:
    assert not contains_secret(value)
    assert secret_kinds(value) == []
    validate_no_secrets(value)
    assert secret_error_for("Required env", value) is None


def test_self_referencing_data_does_not_loop() -> None:
    data: list[object] = ["OPENAI_API_KEY"]
    data.append(data)
    assert not contains_secret(data)


def test_a_secret_in_a_set_or_in_self_referencing_data_is_found() -> None:
    data: dict[str, object] = {"note": "fine"}
    data["self"] = data
    data["keys"] = ({"x", B12_AWS}, frozenset({"y"}))
    assert contains_secret(data)
    assert secret_kinds(data) == ["AWS access key ID"]
    assert not contains_secret({"a": frozenset({"y"}), "b": {"z"}})


def test_secret_kinds_are_distinct_in_order_of_appearance() -> None:
    value = {"a": B12_AWS, "b": [B12_OPENAI, "sk-" + ALNUM * 6], "c": B12_AWS}
    assert secret_kinds(value) == ["AWS access key ID", "OpenAI API key"]


# --- validation errors --------------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "secret"), POSITIVES, ids=[f"{k}-{i}" for i, (k, _) in enumerate(POSITIVES)])
def test_error_names_the_kind_but_never_echoes_the_value(kind: str, secret: str) -> None:
    with pytest.raises(ValidationError) as caught:
        validate_no_secrets({"note": f"use {secret} please"})

    error = caught.value
    assert error.code == "secret_shaped"
    message = " ".join(error.messages)
    assert f"({kind}" in message
    for text in (message, str(error), repr(error)):
        for part in windows(secret):
            assert part not in text


def test_validator_message_tells_what_to_store_instead() -> None:
    with pytest.raises(
        ValidationError,
        match=re.escape(
            "This looks like a secret (OpenAI API key). Store the name of the environment variable "
            "that holds it (such as OPENAI_API_KEY), never the value."
        ),
    ):
        validate_no_secrets(B12_OPENAI)


def test_field_error_names_the_field_and_suggests_a_matching_name() -> None:
    error = secret_error_for("Required env", ["sk-" + "ant-api03-" + "Ab1_" * 20])

    assert error is not None
    assert error.code == "secret_shaped"
    assert error.messages == [
        "Required env looks like it contains a secret (Anthropic API key). Store the name of the "
        "environment variable that holds it (such as ANTHROPIC_API_KEY), never the value."
    ]


# --- redaction -----------------------------------------------------------------------------------


def test_redact_replaces_exact_extra_values_longest_first_and_ignores_short_ones() -> None:
    text = "token=abcd1234wxyz and abcd1234 and abc and plain"

    redacted = redact(text, extra_values=["abcd1234", "abcd1234wxyz", "abc", "", "plain\n"])

    assert redacted == "token=[REDACTED] and [REDACTED] and abc and [REDACTED]"


def test_overlapping_findings_and_extra_values_become_one_marker() -> None:
    tail = "tail-of-it"
    text = f"key {B12_OPENAI}{tail} end"

    assert redact(text, extra_values=[B12_OPENAI[-6:] + tail]) == "key [REDACTED] end"
    assert redact(f"x {B12_BEARER} y") == "x [REDACTED] y"
    assert redact("aaaaaa", extra_values=["aaaa"]) == REDACTION


def test_redact_covers_the_whole_token_the_library_only_partly_matches() -> None:
    token = jwt_with_array_payload()
    stripe = "sk_" + "live_" + ALNUM * 25  # today's keys are longer than the library's 24

    assert redact(f"jwt={token};") == "jwt=[REDACTED];"
    assert redact(f"key {stripe}.") == "key [REDACTED]."


def test_redact_data_keeps_the_shape_and_does_not_mutate_the_input() -> None:
    data = {
        "env": {"OPENAI_API_KEY": B12_OPENAI, "count": 3},
        B12_AWS: ["ok", (B12_BEARER, 1.5, None)],
        "ghp_" + ALNUM * 9: "second key that redacts to the same text",
        "note": "value my-exact-secret here",
    }
    original = json.loads(json.dumps(data, default=list))

    result = redact_data(data, extra_values=["my-exact-secret"])

    assert result == {
        "env": {"OPENAI_API_KEY": REDACTION, "count": 3},
        REDACTION: ["ok", (REDACTION, 1.5, None)],
        REDACTION + " (2)": "second key that redacts to the same text",
        "note": "value [REDACTED] here",
    }
    assert json.loads(json.dumps(data, default=list)) == original
    assert redact_data(7) == 7


def test_scanning_leaves_detect_secrets_global_settings_alone() -> None:
    from detect_secrets.settings import get_settings

    before = get_settings().json()
    find_secrets(B12_BEARER + " " + B12_AWS + " " + pem())
    assert get_settings().json() == before


# --- logging ---------------------------------------------------------------------------------------


def test_logging_filter_redacts_args_and_tracebacks(caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("evalhub.tests.secrets")
    caplog.handler.addFilter(RedactSecretsFilter())
    try:
        with caplog.at_level(logging.INFO, logger=logger.name):
            logger.info("start payload %s", {"env": {"OPENAI_API_KEY": B12_OPENAI}})
            try:
                raise RuntimeError("422 echo: " + B12_BEARER + " " + B12_AWS)
            except RuntimeError:
                logger.exception("provider failed for %s", "my-exact-secret")
            logger.warning("bad format %s %s", B12_OPENAI)  # too few args
    finally:
        caplog.handler.filters.clear()

    output = caplog.text + "".join(record.getMessage() for record in caplog.records)
    for secret in (B12_OPENAI, B12_JWT, B12_AWS):
        assert secret not in output
    assert "start payload {'env': {'OPENAI_API_KEY': '[REDACTED]'}}" in caplog.text
    assert "RuntimeError: 422 echo: [REDACTED] [REDACTED]" in caplog.text
    assert caplog.records[1].exc_info is None and caplog.records[1].args == ()


# --- performance -----------------------------------------------------------------------------------


def one_megabyte() -> str:
    line = (
        '{"ts": "2025-01-02T03:04:05Z", "run": "rwe-453d278ebeaabe66", "model": '
        '"openrouter/moonshotai/kimi-k2.5", "sha": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", '
        '"msg": "Bearer token required; see https://example.com/docs; set OPENAI_API_KEY"}\n'
    )
    text = line * (1_000_000 // len(line))
    return text + B12_OPENAI + "\n" + B12_BEARER


def test_benchmark_scanning_one_megabyte(benchmark) -> None:  # type: ignore[no-untyped-def]
    text = one_megabyte()

    findings = benchmark(find_secrets, text)

    assert [finding.kind for finding in findings] == ["OpenAI API key", "Bearer token"]


@pytest.mark.parametrize(
    "text",
    [
        one_megabyte(),
        "a" * 1_000_000,
        "Bearer " + "!" * 1_000_000,
        "://aa:bb " * 110_000,
        "sk-" * 330_000,
        "-----BEGIN RSA PRIVATE KEY-----" * 30_000,
        "1234567890" * 100_000,
    ],
    ids=["log", "one-letter", "bearer-punctuation", "url-fragments", "sk-prefixes", "pem-headers", "digits"],
)
def test_one_megabyte_scans_in_linear_time(text: str) -> None:
    # A generous bound: it catches quadratic backtracking, not ordinary slowness.
    started = time.perf_counter()
    redact(text)
    assert time.perf_counter() - started < 3.0
