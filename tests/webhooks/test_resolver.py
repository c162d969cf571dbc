"""The operator's hosts-style override: read before DNS, again at every lookup."""

import ipaddress
from pathlib import Path

import pytest

from services.webhooks.resolver import HostsOverride, read_hosts, resolver
from services.webhooks.targets import UnsafeTarget, check_target, resolve


def test_hosts_format() -> None:
    table = read_hosts(
        "# pinned webhook hosts\n"
        "93.184.216.34 hooks.example.com Alias.Example.com.  # trailing comment\n"
        "2606:4700::1 hooks.example.com\n"
        "not-an-address bad.example.com\n"
        "lonely\n"
    )
    assert table == {
        "hooks.example.com": [
            ipaddress.ip_address("93.184.216.34"),
            ipaddress.ip_address("2606:4700::1"),
        ],
        "alias.example.com": [ipaddress.ip_address("93.184.216.34")],
    }


async def test_a_listed_name_resolves_from_the_file_and_follows_its_changes(
    tmp_path: Path,
) -> None:
    hosts = tmp_path / "hosts"
    hosts.write_text("93.184.216.34 rebind.example.test\n")
    resolve_with_file = resolver(hosts)
    target = await check_target(
        "https://Rebind.example.test/x", allow_private=False, resolver=resolve_with_file
    )
    assert target.addresses == [ipaddress.ip_address("93.184.216.34")]
    hosts.write_text("127.0.0.1 rebind.example.test\n")
    with pytest.raises(UnsafeTarget, match="not a public address"):
        await check_target(
            "https://rebind.example.test/x", allow_private=False, resolver=resolve_with_file
        )


async def test_other_names_go_to_dns(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts"
    hosts.write_text("93.184.216.34 pinned.example.test\n")
    assert await HostsOverride(hosts).resolve("localhost", 80) == await resolve("localhost", 80)


async def test_an_unreadable_file_refuses_instead_of_falling_back_to_dns(tmp_path: Path) -> None:
    with pytest.raises(UnsafeTarget, match="override file"):
        await HostsOverride(tmp_path / "missing").resolve("pinned.example.test", 443)


def test_without_a_file_dns_is_used() -> None:
    assert resolver(None) is resolve
