"""Which regex plugins of ``detect-secrets`` run, and the cheap tests that let a text skip one.

``lcm.secrets.detector`` locates what each plugin finds; this module is the
table of plugins, the kind each finding is given, and the literal hints and
text gates that decide, per text, which plugins are worth running.
"""

from __future__ import annotations

import re

from detect_secrets.plugins.artifactory import ArtifactoryDetector
from detect_secrets.plugins.aws import AWSKeyDetector
from detect_secrets.plugins.azure_storage_key import AzureStorageKeyDetector
from detect_secrets.plugins.base import RegexBasedDetector
from detect_secrets.plugins.basic_auth import BasicAuthDetector
from detect_secrets.plugins.discord import DiscordBotTokenDetector
from detect_secrets.plugins.github_token import GitHubTokenDetector
from detect_secrets.plugins.gitlab_token import GitLabTokenDetector
from detect_secrets.plugins.jwt import JwtTokenDetector
from detect_secrets.plugins.mailchimp import MailchimpDetector
from detect_secrets.plugins.npm import NpmDetector
from detect_secrets.plugins.openai import OpenAIDetector
from detect_secrets.plugins.pypi_token import PypiTokenDetector
from detect_secrets.plugins.sendgrid import SendGridDetector
from detect_secrets.plugins.slack import SlackDetector
from detect_secrets.plugins.square_oauth import SquareOAuthDetector
from detect_secrets.plugins.stripe import StripeDetector
from detect_secrets.plugins.telegram_token import TelegramBotTokenDetector
from detect_secrets.plugins.twilio import TwilioKeyDetector

# Each regex plugin, the kind its findings get (the placeholder's word), and
# substrings one of which every match holds: a text holding none skips the
# plugin (``None``: always run). Hints and text are compared lowercased, so
# a hint also covers a case-insensitive pattern (and a case-sensitive one is
# run on a few texts more than it needs). Every pattern is scanned for at
# every position of the text, so an ingest of agent transcripts (nine in ten
# messages pass the detector's first check: JSON holds long ids) paid for each
# plugin on each message; the literal prefixes every key format starts with
# skip nearly all of them. Discord's and Twilio's start with a class or with
# two letters found in most text: they always run.
PLUGINS: tuple[tuple[RegexBasedDetector, str, tuple[str, ...] | None], ...] = (
    (AWSKeyDetector(), "aws_key", ("a3t", "abia", "acca", "akia", "asia", "aws")),
    (
        ArtifactoryDetector(),
        "artifactory_token",
        (
            "AKC",
            "AP0",
            "AP1",
            "AP2",
            "AP3",
            "AP4",
            "AP5",
            "AP6",
            "AP7",
            "AP8",
            "AP9",
            "APA",
            "APB",
            "APC",
            "APD",
            "APE",
            "APF",
        ),
    ),
    (AzureStorageKeyDetector(), "azure_storage_key", ("accountkey=",)),
    (BasicAuthDetector(), "password_in_url", ("://",)),
    (DiscordBotTokenDetector(), "discord_token", None),
    (GitHubTokenDetector(), "github_token", ("ghp_", "gho_", "ghu_", "ghs_", "ghr_")),
    (
        GitLabTokenDetector(),
        "gitlab_token",
        (
            "glpat-",
            "gldt-",
            "glft-",
            "glsoat-",
            "glrt-",
            "gr1348941",
            "glcbt-",
            "glimt-",
            "glptt-",
            "glagent-",
            "gloas-",
        ),
    ),
    (JwtTokenDetector(), "jwt", ("eyJ",)),
    (MailchimpDetector(), "mailchimp_key", ("-us",)),
    (NpmDetector(), "npm_token", ("_authToken",)),
    (OpenAIDetector(), "openai_key", ("T3BlbkFJ",)),
    (PypiTokenDetector(), "pypi_token", ("pypi-",)),
    (SendGridDetector(), "sendgrid_key", ("sg.",)),
    (SlackDetector(), "slack_token", ("xox", "hooks.slack.com")),
    (SquareOAuthDetector(), "square_token", ("sq0csp-",)),
    (StripeDetector(), "stripe_key", ("k_live_",)),
    (TelegramBotTokenDetector(), "telegram_token", None),  # gated below (TEXT_GATES)
    (TwilioKeyDetector(), "twilio_key", None),
)
# Patterns a plugin's every match holds a match of, looked for in the text as
# is: Telegram's tokens are ``\d{8,10}:…`` (a colon is in every JSON text; a
# digit right before one in one text in nine), and its pattern, starting with
# a class, cost more than any other plugin's on agent transcripts.
TEXT_GATES = {"telegram_token": re.compile(r"\d:")}
# Each plugin with its hints as one pattern over the lowercased text (one scan
# instead of one per hint: half the time) and its gate over the text as is.
GATED: tuple[
    tuple[RegexBasedDetector, str, re.Pattern[str] | None, re.Pattern[str] | None], ...
] = tuple(
    (
        plugin,
        kind,
        None if hints is None else re.compile("|".join(re.escape(h.lower()) for h in hints)),
        TEXT_GATES.get(kind),
    )
    for plugin, kind, hints in PLUGINS
)
