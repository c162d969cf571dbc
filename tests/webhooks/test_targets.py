"""The SSRF guard: only public addresses unless private networks are allowed."""

import ipaddress

import pytest

from services.webhooks.targets import UnsafeTarget, check_target, is_public


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1",
        "::1",
        "10.0.0.1",
        "172.16.5.4",
        "192.168.1.1",
        "169.254.169.254",
        "100.64.0.1",
        "0.0.0.0",
        "224.0.0.1",
        "240.0.0.1",
        "fe80::1",
        "fc00::1",
        "::ffff:127.0.0.1",
        "::",
    ],
)
def test_non_public_addresses(address: str) -> None:
    assert not is_public(ipaddress.ip_address(address))


@pytest.mark.parametrize("address", ["93.184.216.34", "8.8.8.8", "2606:4700:4700::1111"])
def test_public_addresses(address: str) -> None:
    assert is_public(ipaddress.ip_address(address))


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1/hook",
        "http://[::1]:8080/hook",
        "https://10.0.0.1/hook",
        "http://169.254.169.254/latest/meta-data",
        "http://localhost:9000/hook",  # a name that resolves to loopback
    ],
)
async def test_private_targets_are_refused_unless_allowed(url: str) -> None:
    with pytest.raises(UnsafeTarget):
        await check_target(url, allow_private=False)
    target = await check_target(url, allow_private=True)
    assert target.addresses


@pytest.mark.parametrize(
    "url", ["ftp://example.com/x", "/relative", "http://", "https://user:pw@example.com/"]
)
async def test_malformed_urls(url: str) -> None:
    with pytest.raises(UnsafeTarget):
        await check_target(url, allow_private=True)
