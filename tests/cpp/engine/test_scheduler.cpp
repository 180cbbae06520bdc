#include <gtest/gtest.h>

#include <memory>
#include <tuple>

#include "engine/scheduler.h"

using namespace striker;

namespace {

KvLayout full_only(int64_t blocks) {
  KvLayout L;
  L.block_size = 4;
  L.num_full_blocks = blocks;
  L.use_sliding = false;
  return L;
}

struct Seqs {
  std::vector<std::unique_ptr<Sequence>> all;
  Sequence* make(int64_t prompt_len) {
    auto s = std::make_unique<Sequence>();
    s->id = int64_t(all.size());
    s->prompt_len = prompt_len;
    s->tokens.assign(size_t(prompt_len), 1);
    all.push_back(std::move(s));
    return all.back().get();
  }
};

// (sequence id, start, count) for every chunk of a plan.
std::vector<std::tuple<int64_t, int64_t, int64_t>> chunks(const StepPlan& p) {
  std::vector<std::tuple<int64_t, int64_t, int64_t>> out;
  for (const auto& c : p.chunks) out.emplace_back(c.seq->id, c.start, c.count);
  return out;
}

using C = std::tuple<int64_t, int64_t, int64_t>;

// What the engine does after a step: KV is computed, sampled chunks append a token.
void finish_step(Scheduler& s, const StepPlan& p) {
  s.mark_computed(p);
  for (const auto& c : p.chunks)
    if (c.start + c.count == c.seq->num_tokens()) c.seq->tokens.push_back(7);
}

}  // namespace

TEST(Scheduler, ChunkedPrefillMixesWithDecodes) {
  KvBlockManager kv(full_only(100));
  Scheduler s({4, 8}, kv);
  Seqs q;
  Sequence* a = q.make(10);
  Sequence* b = q.make(5);
  s.add(a);
  s.add(b);

  StepPlan p1 = s.schedule();
  EXPECT_EQ(chunks(p1), (std::vector<C>{{0, 0, 8}}));
  EXPECT_FALSE(p1.chunks[0].samples());
  finish_step(s, p1);

  StepPlan p2 = s.schedule();  // a finishes its prompt, b's whole prompt fits in the rest
  EXPECT_EQ(chunks(p2), (std::vector<C>{{0, 8, 2}, {1, 0, 5}}));
  EXPECT_TRUE(p2.chunks[0].samples());
  EXPECT_TRUE(p2.chunks[1].samples());
  finish_step(s, p2);

  StepPlan p3 = s.schedule();  // both decode
  EXPECT_EQ(chunks(p3), (std::vector<C>{{0, 10, 1}, {1, 5, 1}}));
  EXPECT_EQ(p3.num_tokens(), 2);
  EXPECT_EQ(a->blocks.full.size(), 3u);
  EXPECT_EQ(b->blocks.full.size(), 2u);
}

TEST(Scheduler, DecodesShareTheBudgetWithANewPrefill) {
  KvBlockManager kv(full_only(100));
  Scheduler s({4, 8}, kv);
  Seqs q;
  Sequence* a = q.make(3);
  s.add(a);
  finish_step(s, s.schedule());
  Sequence* b = q.make(20);
  s.add(b);
  StepPlan p = s.schedule();  // a's decode first, then 7 tokens of b's prompt
  EXPECT_EQ(chunks(p), (std::vector<C>{{0, 3, 1}, {1, 0, 7}}));
}

TEST(Scheduler, MaxNumSeqsLimitsRunning) {
  KvBlockManager kv(full_only(100));
  Scheduler s({2, 64}, kv);
  Seqs q;
  for (int i = 0; i < 3; ++i) s.add(q.make(4));
  StepPlan p = s.schedule();
  EXPECT_EQ(chunks(p), (std::vector<C>{{0, 0, 4}, {1, 0, 4}}));
  EXPECT_EQ(s.running().size(), 2u);
  EXPECT_EQ(s.waiting().size(), 1u);
}

TEST(Scheduler, PreemptsTheNewestWhenBlocksRunOut) {
  KvBlockManager kv(full_only(6));
  Scheduler s({4, 32}, kv);
  Seqs q;
  Sequence* a = q.make(8);
  Sequence* b = q.make(8);
  Sequence* c = q.make(8);
  s.add(a);
  s.add(b);
  s.add(c);
  StepPlan p1 = s.schedule();
  EXPECT_EQ(chunks(p1), (std::vector<C>{{0, 0, 8}, {1, 0, 8}, {2, 0, 8}}));
  EXPECT_EQ(kv.full_pool().num_free(), 0);
  finish_step(s, p1);

  // Each needs a third block for position 8: c (newest) is preempted, its 2 blocks go to a and b.
  StepPlan p2 = s.schedule();
  EXPECT_EQ(chunks(p2), (std::vector<C>{{0, 8, 1}, {1, 8, 1}}));
  ASSERT_EQ(p2.preempted.size(), 1u);
  EXPECT_EQ(p2.preempted[0], c);
  EXPECT_EQ(c->num_computed, 0);
  EXPECT_TRUE(c->blocks.full.empty());
  EXPECT_EQ(c->num_tokens(), 9);  // its sampled token is kept for the recompute
  EXPECT_EQ(s.num_preemptions(), 1);
  EXPECT_EQ(s.waiting().front(), c);
  finish_step(s, p2);

  StepPlan p3 = s.schedule();  // a and b decode inside block 2; c still does not fit
  EXPECT_EQ(chunks(p3), (std::vector<C>{{0, 9, 1}, {1, 9, 1}}));
  EXPECT_TRUE(p3.preempted.empty());

  s.remove(a);  // a finishes: c comes back and recomputes prompt + its earlier token
  finish_step(s, p3);
  StepPlan p4 = s.schedule();
  EXPECT_EQ(chunks(p4), (std::vector<C>{{1, 10, 1}, {2, 0, 9}}));
}

TEST(Scheduler, WhenBothNeedABlockTheOlderProceeds) {
  KvBlockManager kv(full_only(2));
  Scheduler s({4, 32}, kv);
  Seqs q;
  Sequence* a = q.make(4);
  Sequence* b = q.make(4);
  s.add(a);
  s.add(b);
  finish_step(s, s.schedule());
  StepPlan p = s.schedule();  // both need a second block: b is preempted, a proceeds
  EXPECT_EQ(chunks(p), (std::vector<C>{{0, 4, 1}}));
  EXPECT_EQ(p.preempted, (std::vector<Sequence*>{b}));
}

TEST(Scheduler, FcfsHeadOfLineIsNotOvertaken) {
  KvBlockManager kv(full_only(4));
  Scheduler s({4, 64}, kv);
  Seqs q;
  Sequence* a = q.make(8);
  s.add(a);
  finish_step(s, s.schedule());  // a holds 2 blocks and has 9 tokens
  Sequence* big = q.make(16);
  Sequence* small = q.make(2);
  s.add(big);
  s.add(small);
  StepPlan p = s.schedule();
  // a decodes (needs block 3 of 4); big gets what is left of the pool as a partial chunk.
  EXPECT_EQ(chunks(p), (std::vector<C>{{0, 8, 1}, {1, 0, 4}}));
  EXPECT_EQ(s.waiting().front(), small);
}

TEST(Scheduler, RemoveFreesBlocksOfWaitingAndRunning) {
  KvBlockManager kv(full_only(10));
  Scheduler s({4, 8}, kv);
  Seqs q;
  Sequence* a = q.make(12);
  s.add(a);
  finish_step(s, s.schedule());
  EXPECT_EQ(kv.full_pool().num_used(), 2);
  s.remove(a);
  EXPECT_EQ(kv.full_pool().num_used(), 0);
  EXPECT_TRUE(s.running().empty());
  EXPECT_EQ(a->status, SeqStatus::Finished);
}

TEST(Scheduler, PerSequenceChunkCap) {
  KvBlockManager kv(full_only(100));
  Scheduler s({4, 64}, kv);
  Seqs q;
  Sequence* a = q.make(10);
  a->max_chunk = 3;
  s.add(a);
  EXPECT_EQ(chunks(s.schedule()), (std::vector<C>{{0, 0, 3}}));
}

// Sequences with a max_chunk (prompt logprobs: a logits row per token) share max_capped_tokens per
// step: three of them at once get 5, then 2 of the 7, the rest waits — running or queued — and
// every one finishes its prompt; an uncapped sequence is not held back.
TEST(Scheduler, CappedSequencesShareOneBudgetPerStep) {
  KvBlockManager kv(full_only(100));
  Scheduler s({8, 64, 7}, kv);
  Seqs q;
  Sequence* a = q.make(12);
  Sequence* b = q.make(12);
  Sequence* c = q.make(12);
  Sequence* d = q.make(6);  // no cap
  for (Sequence* x : {a, b, c}) x->max_chunk = 5;
  for (Sequence* x : {a, b, c, d}) s.add(x);
  StepPlan p = s.schedule();
  // c waits at the head of the queue (no capped tokens left), so d behind it waits too (FCFS).
  EXPECT_EQ(chunks(p), (std::vector<C>{{0, 0, 5}, {1, 0, 2}}));
  finish_step(s, p);
  for (int step = 0; step < 20 && (a->num_computed < 12 || b->num_computed < 12 || c->num_computed < 12); ++step) {
    p = s.schedule();
    int64_t capped = 0;
    for (const auto& ch : p.chunks) capped += ch.seq->max_chunk > 0 ? ch.count : 0;
    EXPECT_LE(capped, 7) << "step " << step;
    finish_step(s, p);
  }
  EXPECT_GE(a->num_computed, 12);
  EXPECT_GE(b->num_computed, 12);
  EXPECT_GE(c->num_computed, 12);
  EXPECT_GE(d->num_computed, 6);
}
