"""Port blocks for a stack are drawn where outgoing connections never take a port."""

from tessera.processes import BLOCK_LOW, ephemeral_low, free_port_block, port_free


def test_a_port_block_is_free_and_below_the_ephemeral_range() -> None:
    for _ in range(20):
        first = free_port_block(12)
        assert first >= BLOCK_LOW
        assert first + 12 <= ephemeral_low()
        assert all(port_free(first + i) for i in range(12))
