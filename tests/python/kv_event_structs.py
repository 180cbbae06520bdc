"""vLLM's KV event structs (vllm/distributed/kv_events.py, the layout vllm-router 0.1.17 decodes),
written out with msgspec so the tests decode striker's bytes exactly as vLLM's consumers do:
EventBatch is array_like ([ts, events, data_parallel_rank]); events are maps tagged with the
class name under "type", omit_defaults (None-defaulted fields left out, required ones always
present). Re-encoding a decoded batch must give back the same bytes."""
from typing import Any

import msgspec


class EventBatch(msgspec.Struct, array_like=True, omit_defaults=True, gc=False):
    ts: float
    events: list[Any]
    data_parallel_rank: int | None = None


class KVCacheEvent(msgspec.Struct, omit_defaults=True, gc=False, tag=True):
    """Base class for all KV cache-related events"""


class BlockStored(KVCacheEvent):
    block_hashes: list[int | bytes]
    parent_block_hash: int | bytes | None
    token_ids: list[int]
    block_size: int
    lora_id: int | None
    medium: str | None
    lora_name: str | None
    extra_keys: list[tuple[Any, ...] | None] | None = None
    group_idx: int | None = None
    kv_cache_spec_kind: str | None = None
    kv_cache_spec_sliding_window: int | None = None


class BlockRemoved(KVCacheEvent):
    block_hashes: list[int | bytes]
    medium: str | None
    group_idx: int | None = None


class AllBlocksCleared(KVCacheEvent):
    pass


class KVEventBatch(EventBatch):
    events: list[BlockStored | BlockRemoved | AllBlocksCleared]


DECODER = msgspec.msgpack.Decoder(KVEventBatch)
ENCODER = msgspec.msgpack.Encoder()


def decode(payload: bytes) -> KVEventBatch:
    batch = DECODER.decode(payload)
    assert ENCODER.encode(batch) == payload, "not msgspec's byte-exact encoding of vLLM's structs"
    return batch
