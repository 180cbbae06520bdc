"""The golden batch of tests/cpp/kv_events/test_kv_event_wire.cpp is msgspec's encoding of vLLM's
structs (kv_event_structs.py): re-derived here, so the C++ test checks striker's encoder against
msgspec itself, not against a string someone typed."""
import pathlib
import re

import kv_event_structs as kv

CPP_TEST = pathlib.Path(__file__).resolve().parents[1] / "cpp" / "kv_events" / "test_kv_event_wire.cpp"


def test_cpp_golden_batch_is_msgspecs_encoding():
    batch = kv.KVEventBatch(ts=1700000000.25, data_parallel_rank=0, events=[
        kv.BlockStored(block_hashes=[2**64 - 1, 7, 300], parent_block_hash=None, token_ids=list(range(48)),
                       block_size=16, lora_id=None, medium="GPU", lora_name=None),
        kv.BlockStored(block_hashes=[70000], parent_block_hash=300, token_ids=[151329] * 16, block_size=16,
                       lora_id=None, medium="GPU", lora_name=None, group_idx=0, kv_cache_spec_kind="full_attention"),
        kv.BlockRemoved(block_hashes=[7, 1 << 40], medium="GPU"),
        kv.AllBlocksCleared(),
    ])
    golden = re.search(r'BatchMatchesMsgspecEncodingOfVllmStructs.*?"([0-9a-f]{64,})"', CPP_TEST.read_text(), re.S)
    assert golden, "golden hex not found in the C++ test"
    assert kv.ENCODER.encode(batch).hex() == golden.group(1)
    assert kv.decode(bytes.fromhex(golden.group(1))) == batch
