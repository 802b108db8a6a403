// The handle tables every call goes through: an open-addressed array whose
// removals shift later entries back, so the cases are the ones such a table
// gets wrong (a removal losing a later entry of the same probe run, or one
// that wraps around the end, growth keeping every entry, the empty marker
// used as a key, concurrent finds against removals).
#include "core/registry.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <random>
#include <thread>
#include <vector>

namespace rdmacm::core {
namespace {

struct Thing {
  int n = 0;
};

const void* key(uintptr_t k) { return reinterpret_cast<const void*>(k); }

TEST(RegistryTest, FindsWhatWasAddedUntilItIsTaken) {
  Registry<void, Thing> r;
  EXPECT_EQ(r.find(key(64)), nullptr);  // empty: no table yet
  auto t = std::make_shared<Thing>();
  r.add(key(64), t);
  EXPECT_EQ(r.find(key(64)), t);
  EXPECT_EQ(r.size(), 1u);
  EXPECT_EQ(r.take(key(64)), t);
  EXPECT_EQ(r.take(key(64)), nullptr) << "a second take is refused";
  EXPECT_EQ(r.find(key(64)), nullptr);
  EXPECT_EQ(r.size(), 0u);
}

TEST(RegistryTest, TheEmptyMarkerIsNeverAKey) {
  Registry<void, Thing> r;
  r.add(key(8), std::make_shared<Thing>());
  r.take(key(8));
  EXPECT_EQ(r.find(nullptr), nullptr);
  EXPECT_EQ(r.take(nullptr), nullptr);
  r.take_if(nullptr, nullptr);
  r.add(nullptr, std::make_shared<Thing>());
  EXPECT_EQ(r.find(nullptr), nullptr);
  EXPECT_EQ(r.size(), 0u);
}

TEST(RegistryTest, ARemovedEntryDoesNotHideTheNextOfItsProbeRun) {
  Registry<void, Thing> r;
  // Many keys, so that probe runs form; then remove every other one.
  constexpr uintptr_t kKeys = 1000;
  for (uintptr_t i = 1; i <= kKeys; ++i) r.add(key(i * 8), std::make_shared<Thing>(Thing{int(i)}));
  for (uintptr_t i = 1; i <= kKeys; i += 2) ASSERT_NE(r.take(key(i * 8)), nullptr);
  for (uintptr_t i = 2; i <= kKeys; i += 2) {
    auto t = r.find(key(i * 8));
    ASSERT_NE(t, nullptr) << i;
    EXPECT_EQ(t->n, int(i));
  }
  EXPECT_EQ(r.size(), kKeys / 2);
  int seen = 0;
  r.for_each([&](const void*, const Thing&) { ++seen; });
  EXPECT_EQ(seen, int(kKeys / 2));
}

TEST(RegistryTest, ChurnKeepsEveryLiveEntryFindable) {
  Registry<void, Thing> r;
  // A million add/take pairs over a few live keys (probe runs wrap around
  // the end of the 16 slots again and again).
  for (uintptr_t i = 0; i < 1000000; ++i) {
    r.add(key((i + 1) * 16), std::make_shared<Thing>());
    if (i >= 3) {
      ASSERT_NE(r.take(key((i - 2) * 16)), nullptr) << i;
      ASSERT_NE(r.find(key((i - 1) * 16)), nullptr) << i;
      ASSERT_NE(r.find(key(i * 16)), nullptr) << i;
    }
  }
  EXPECT_EQ(r.size(), 3u);
}

TEST(RegistryTest, AgreesWithAMapOverRandomAddsAndTakes) {
  Registry<void, Thing> r;
  std::map<uintptr_t, int> model;
  std::mt19937 rng(7);
  for (int step = 0; step < 200000; ++step) {
    uintptr_t k = (rng() % 48 + 1) * 8;  // few keys: long probe runs, wrap-arounds
    if (rng() % 2) {
      r.add(key(k), std::make_shared<Thing>(Thing{step}));
      model[k] = step;
    } else {
      auto t = r.take(key(k));
      ASSERT_EQ(t != nullptr, model.erase(k) == 1) << step;
    }
    uintptr_t probe = (rng() % 48 + 1) * 8;
    auto t = r.find(key(probe));
    auto m = model.find(probe);
    ASSERT_EQ(t != nullptr, m != model.end()) << step;
    if (t) {
      ASSERT_EQ(t->n, m->second) << step;
    }
  }
  EXPECT_EQ(r.size(), model.size());
}

TEST(RegistryTest, TakeIfLeavesANewerOwnerOfTheSameKey) {
  Registry<void, Thing> r;
  auto old_owner = std::make_shared<Thing>();
  auto new_owner = std::make_shared<Thing>();
  r.add(key(32), old_owner);
  r.add(key(32), new_owner);  // replaces
  EXPECT_EQ(r.size(), 1u);
  r.take_if(key(32), old_owner.get());
  EXPECT_EQ(r.find(key(32)), new_owner);
  r.take_if(key(32), new_owner.get());
  EXPECT_EQ(r.find(key(32)), nullptr);
  EXPECT_EQ(old_owner.use_count(), 1) << "the table let go of the replaced owner";
}

TEST(RegistryTest, TheLeafLockExcludesUnderContention) {
  // More threads than this machine's cores: holders get preempted, waiters
  // go to the futex; every increment must still be counted once.
  LeafLock lock;
  long count = 0;  // plain: only the lock protects it
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 200000; ++i) {
        std::lock_guard guard(lock);
        ++count;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(count, 6 * 200000);
}

TEST(RegistryTest, FindsRacingAddsAndTakesSeeLiveOwnersOnly) {
  Registry<void, Thing> r;
  std::atomic<bool> stop{false};
  constexpr uintptr_t kKeys = 64;
  for (uintptr_t i = 1; i <= kKeys; ++i) r.add(key(i * 8), std::make_shared<Thing>(Thing{int(i)}));
  std::vector<std::thread> readers;
  std::atomic<long> bad{0};
  for (int t = 0; t < 2; ++t)
    readers.emplace_back([&] {
      while (!stop)
        for (uintptr_t i = 1; i <= kKeys; ++i)
          if (auto found = r.find(key(i * 8)); found && found->n != int(i)) ++bad;
    });
  for (int round = 0; round < 2000; ++round)
    for (uintptr_t i = 1; i <= kKeys; i += 3) {
      auto t = r.take(key(i * 8));
      r.add(key(i * 8), t ? t : std::make_shared<Thing>(Thing{int(i)}));
    }
  stop = true;
  for (auto& t : readers) t.join();
  EXPECT_EQ(bad, 0);
  EXPECT_EQ(r.size(), kKeys);
}

}  // namespace
}  // namespace rdmacm::core
