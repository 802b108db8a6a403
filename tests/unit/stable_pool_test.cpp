// The type-stable pool ids live in (core/stable_pool.h): what a public
// pointer finds (only listed, live objects at a slot's key), that a reference
// keeps an object alive past its unlisting and the last one destroys it,
// first-in-first-out reuse of freed slots, growth past one step, and finders
// racing the last release (TSan checks the claims in the header comment).
#include "core/stable_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace rdmacm::core {
namespace {

std::atomic<int> alive{0};

struct Pooled {
  Pooled() { alive.fetch_add(1); }
  ~Pooled() { alive.fetch_sub(1); }
  int pub = 0;  // the "public" part a key names, not at the object's start
  char body[300] = {};
};

const void* key_of(const Pooled& t) { return &t.pub; }
PoolRef<Pooled> find(const void* p) { return StablePool<Pooled>::get().find(p, key_of); }

TEST(StablePoolTest, FindsOnlyListedLiveObjectsByTheirKey) {
  auto& pool = StablePool<Pooled>::get();
  int before = alive.load();
  PoolRef<Pooled> t = pool.make();
  EXPECT_EQ(alive.load(), before + 1);
  EXPECT_FALSE(find(&t->pub)) << "not listed yet";
  StablePool<Pooled>::list(*t);
  EXPECT_EQ(find(&t->pub).get(), t.get());
  EXPECT_FALSE(find(reinterpret_cast<const char*>(&t->pub) + 1)) << "inside, not at the key";
  EXPECT_FALSE(find(t.get()->body)) << "another member";
  int local = 0;
  EXPECT_FALSE(find(&local)) << "outside the pool";
  EXPECT_FALSE(find(nullptr));

  const void* p = &t->pub;
  StablePool<Pooled>::unlist(*t);
  EXPECT_FALSE(find(p)) << "unlisted";
  EXPECT_EQ(alive.load(), before + 1) << "our reference keeps it";
  t.reset();
  EXPECT_EQ(alive.load(), before) << "the last reference destroys it";
  EXPECT_FALSE(find(p));
}

TEST(StablePoolTest, ListingHoldsItsOwnReference) {
  auto& pool = StablePool<Pooled>::get();
  int before = alive.load();
  const void* p;
  {
    PoolRef<Pooled> t = pool.make();
    StablePool<Pooled>::list(*t);
    p = &t->pub;
  }
  PoolRef<Pooled> again = find(p);
  ASSERT_TRUE(again) << "listed: alive without any other reference";
  StablePool<Pooled>::unlist(*again);
  StablePool<Pooled>::unlist(*again);  // a second unlist lets go of nothing
  EXPECT_EQ(alive.load(), before + 1);
  again.reset();
  EXPECT_EQ(alive.load(), before);
}

TEST(StablePoolTest, AFreedSlotIsReusedLast) {
  auto& pool = StablePool<Pooled>::get();
  const void* old;
  {
    PoolRef<Pooled> t = pool.make();
    old = t.get();
  }
  // Every other free slot comes first: a stale pointer keeps failing.
  std::vector<PoolRef<Pooled>> others;
  for (int i = 0; i < 100; ++i) {
    others.push_back(pool.make());
    EXPECT_NE(others.back().get(), old) << "after " << i << " new objects";
  }
}

TEST(StablePoolTest, GrowsAndKeepsEveryObjectFindable) {
  auto& pool = StablePool<Pooled>::get();
  std::vector<PoolRef<Pooled>> all;
  for (int i = 0; i < 2000; ++i) {  // several 64 KiB steps of ~320-byte slots
    all.push_back(pool.make());
    all.back()->pub = i;
    StablePool<Pooled>::list(*all.back());
  }
  size_t listed = pool.listed();
  EXPECT_GE(listed, 2000u);
  for (int i = 0; i < 2000; ++i) {
    PoolRef<Pooled> f = find(&all[i]->pub);
    ASSERT_TRUE(f);
    EXPECT_EQ(f->pub, i);
  }
  for (auto& t : all) StablePool<Pooled>::unlist(*t);
  EXPECT_EQ(pool.listed(), listed - 2000);
}

// 32 KiB slots (only their first bytes ever touched): the first 64 MiB
// region holds 2,048, so 2,100 objects need a second region.
struct Big {
  int pub = 0;
  char pad[32000];
};

TEST(StablePoolTest, ASecondRegionIsSearchedToo) {
  auto& pool = StablePool<Big>::get();
  auto key = [](const Big& b) { return static_cast<const void*>(&b.pub); };
  std::vector<PoolRef<Big>> all;
  for (int i = 0; i < 2100; ++i) {
    all.push_back(pool.make());
    all.back()->pub = i;
    StablePool<Big>::list(*all.back());
  }
  EXPECT_EQ(pool.listed(), 2100u);
  for (int i : {0, 2047, 2048, 2099}) {
    PoolRef<Big> f = pool.find(&all[i]->pub, key);
    ASSERT_TRUE(f) << i;
    EXPECT_EQ(f->pub, i);
  }
  EXPECT_FALSE(pool.find(all[2099]->pad, key));
  for (auto& b : all) StablePool<Big>::unlist(*b);
  EXPECT_EQ(pool.listed(), 0u);
}

TEST(StablePoolTest, FindersRacingTheLastReleaseSeeLiveObjectsOnly) {
  auto& pool = StablePool<Pooled>::get();
  constexpr int kKeys = 64;
  std::vector<const void*> keys(kKeys);
  std::vector<PoolRef<Pooled>> refs(kKeys);
  for (int i = 0; i < kKeys; ++i) {
    refs[i] = pool.make();
    StablePool<Pooled>::list(*refs[i]);
    keys[i] = &refs[i]->pub;
    refs[i]->pub = 7;
  }
  std::atomic<bool> stop{false};
  std::atomic<long> found{0};
  std::vector<std::thread> finders;
  for (int f = 0; f < 3; ++f)
    finders.emplace_back([&] {
      while (!stop.load()) {
        for (const void* k : keys)
          if (PoolRef<Pooled> t = find(k)) {
            EXPECT_EQ(t->pub, 7);  // a live, built object
            found.fetch_add(1);
          }
      }
    });
  while (found.load() < 100) std::this_thread::yield();  // the finders are running
  // Unlist and release each, then make a new one in some freed slot; the
  // finders keep looking up the first keys, live, dead or reused.
  for (int round = 0; round < 2000; ++round) {
    int i = round % kKeys;
    StablePool<Pooled>::unlist(*refs[i]);
    refs[i].reset();
    refs[i] = pool.make();
    refs[i]->pub = 7;
    StablePool<Pooled>::list(*refs[i]);
  }
  stop = true;
  for (auto& t : finders) t.join();
  for (auto& r : refs) StablePool<Pooled>::unlist(*r);
}

}  // namespace
}  // namespace rdmacm::core
