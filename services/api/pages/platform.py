"""Which wallet a visitor's device takes, read from the User-Agent, and which visitors are bots.

iPadOS Safari presents itself as a Mac, so an iPad gets the desktop page, which offers both
buttons; that still works. Bots are only the obvious ones: crawlers and link-preview fetchers
that name themselves (docs/pages.md lists them). Command-line clients such as curl are people or
scripts acting for them and count as visitors.
"""

import re
from typing import Literal

Platform = Literal["ios", "android", "desktop"]

_IOS = re.compile(r"iPhone|iPad|iPod", re.IGNORECASE)
_ANDROID = re.compile(r"Android", re.IGNORECASE)

BOT_NAMES = (
    # search and AI crawlers
    "googlebot", "google-inspectiontool", "adsbot-google", "mediapartners-google",
    "apis-google", "feedfetcher-google", "bingbot", "bingpreview", "msnbot", "yandexbot",
    "baiduspider", "duckduckbot", "applebot", "slurp", "petalbot", "bytespider", "gptbot",
    "claudebot", "ccbot", "semrushbot", "ahrefsbot", "mj12bot",
    # link previews in chats and social networks
    "slackbot", "slack-imgproxy", "facebookexternalhit", "facebookcatalog",
    "meta-externalagent", "twitterbot", "whatsapp", "telegrambot", "discordbot",
    "linkedinbot", "skypeuripreview", "pinterestbot", "redditbot", "embedly", "iframely",
    "vkshare", "mastodon",
)  # fmt: skip
_BOT = re.compile(
    # Browsers never put a URL in their User-Agent.
    "|".join(re.escape(name) for name in BOT_NAMES) + r"|https?://",
    re.IGNORECASE,
)
# Self-declared crawlers: "(compatible; SomeBot/1.0; ...)", usually with an info URL. Each
# "compatible;" takes the text up to its ")" and the next starts after it: linear in the
# User-Agent (one pattern with "[^)]*(?:bot|...)" went back over the rest of the string at
# every "compatible;", quadratic: ~15 KB of them held the event loop).
_COMPATIBLE = re.compile(r"compatible;([^)]*)", re.IGNORECASE)
_CRAWLER_WORD = re.compile(r"bot|crawler|spider", re.IGNORECASE)


def detect_platform(user_agent: str | None) -> Platform:
    if not user_agent:
        return "desktop"
    if _IOS.search(user_agent):
        return "ios"
    if _ANDROID.search(user_agent):
        return "android"
    return "desktop"


def is_bot(user_agent: str | None) -> bool:
    """True for crawlers and link-preview fetchers: they get the page, but no event is recorded."""
    if not user_agent:
        return False
    if _BOT.search(user_agent):
        return True
    return any(_CRAWLER_WORD.search(m.group(1)) for m in _COMPATIBLE.finditer(user_agent))
