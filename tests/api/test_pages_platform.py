"""services/api/pages/platform.py: which wallet a User-Agent gets, and which visitors are bots."""

import pytest

from services.api.pages.platform import _COMPATIBLE, detect_platform, is_bot
from tests.support.user_agents import ANDROID, DESKTOP, GOOGLEBOT, IPHONE, SLACKBOT

IPAD_OLD = (
    "Mozilla/5.0 (iPad; CPU OS 12_2 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) "
    "Version/12.1 Mobile/15E148 Safari/604.1"
)
FIREFOX_IOS = (
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 "
    "(KHTML, like Gecko) FxiOS/124.0 Mobile/15E148 Safari/605.1.15"
)
CUBOT = (
    "Mozilla/5.0 (Linux; Android 10; CUBOT_X30) AppleWebKit/537.36 (KHTML, like Gecko) "
    "Chrome/120.0.0.0 Mobile Safari/537.36"
)
MAC = (
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) "
    "Version/17.4 Safari/605.1.15"
)
GOOGLEBOT_MOBILE = (
    "Mozilla/5.0 (Linux; Android 6.0.1; Nexus 5X Build/MMB29P) AppleWebKit/537.36 "
    "(KHTML, like Gecko) Chrome/124.0.0.0 Mobile Safari/537.36 "
    "(compatible; Googlebot/2.1; +http://www.google.com/bot.html)"
)


@pytest.mark.parametrize(
    ("user_agent", "platform"),
    [
        (IPHONE, "ios"),
        (IPAD_OLD, "ios"),
        (FIREFOX_IOS, "ios"),
        (ANDROID, "android"),
        (CUBOT, "android"),
        (DESKTOP, "desktop"),
        (MAC, "desktop"),  # also iPadOS 13+, which presents itself as a Mac
        ("curl/8.5.0", "desktop"),
        ("", "desktop"),
        (None, "desktop"),
    ],
)
def test_platform(user_agent: str | None, platform: str) -> None:
    assert detect_platform(user_agent) == platform


@pytest.mark.parametrize(
    "user_agent",
    [
        GOOGLEBOT,
        GOOGLEBOT_MOBILE,
        "Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)",
        SLACKBOT,
        "Slack-ImgProxy (+https://api.slack.com/robots)",
        "facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)",
        "Twitterbot/1.0",
        "WhatsApp/2.23.20.0 A",
        "TelegramBot (like TwitterBot)",
        "Mozilla/5.0 (compatible; Discordbot/2.0; +https://discordapp.com)",
        "LinkedInBot/1.0 (compatible; Mozilla/5.0; Apache-HttpClient +http://www.linkedin.com)",
        "Mozilla/5.0 (compatible; SomeNewCrawler/0.1)",
        "http.rb/5.1.1 (Mastodon/4.2.8; +https://mastodon.social/)",
    ],
)
def test_obvious_bots(user_agent: str) -> None:
    assert is_bot(user_agent)


@pytest.mark.parametrize(
    "user_agent", [IPHONE, ANDROID, CUBOT, DESKTOP, MAC, "curl/8.5.0", "Wget/1.21", "", None]
)
def test_people_and_their_tools_are_not_bots(user_agent: str | None) -> None:
    assert not is_bot(user_agent)


def test_a_user_agent_built_to_backtrack_is_read_in_linear_time() -> None:
    """~15 KB of "compatible;" took the old pattern ~10^7 steps per request (quadratic), on the
    event loop. Counted, not timed: the new reading visits each character a bounded number of
    times, so doubling the input at most doubles the matches it tries."""
    hostile = "compatible;" * 1400
    assert not is_bot(hostile)
    assert is_bot(hostile + "(compatible; Googlebot/2.1)")
    assert len(list(_COMPATIBLE.finditer(hostile))) == 1  # one match runs to the end, no more
