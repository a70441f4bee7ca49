#include "daemon/handoff.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <future>
#include <memory>
#include <thread>
#include <vector>

namespace medq::daemon {
namespace {

// A libuv loop run by the test's thread, which plays the loop thread; the
// worker's side runs on threads the tests start.
struct LoopFixture {
  LoopFixture() {
    uv_loop_init(&loop);
    uv_timer_init(&loop, &guard);
    guard.data = this;
    handoff = std::make_unique<Handoff>(&loop);
  }
  ~LoopFixture() {
    handoff->Close();
    uv_close(reinterpret_cast<uv_handle_t*>(&guard), nullptr);
    uv_run(&loop, UV_RUN_DEFAULT);  // lets the handles close
    uv_loop_close(&loop);
  }
  // Runs whatever is ready without waiting.
  void RunReady() { uv_run(&loop, UV_RUN_NOWAIT); }
  // Waits for the next wake-up and runs its callbacks; false if none came
  // within 10 s (a lost wake-up fails the test rather than hanging it).
  bool RunOnce() {
    timed_out = false;
    uv_timer_start(
        &guard, [](uv_timer_t* t) { static_cast<LoopFixture*>(t->data)->timed_out = true; }, 10000,
        0);
    uv_run(&loop, UV_RUN_ONCE);
    uv_timer_stop(&guard);
    return !timed_out;
  }

  uv_loop_t loop;
  uv_timer_t guard;
  bool timed_out = false;
  std::unique_ptr<Handoff> handoff;
  std::vector<int> ran;  // loop thread only
};

// A worker thread that opens a WakeOnce, posts completions recording `values`
// into f.ran, and keeps the scope open until End().
class HoldingWorker {
 public:
  HoldingWorker(LoopFixture& f, std::vector<int> values)
      : thread_([this, &f, values] {
          const Handoff::WakeOnce once(*f.handoff);
          for (const int v : values)
            f.handoff->PostToLoop([&f, v] { f.ran.push_back(v); });
          posted_.set_value();
          end_.get_future().wait();
        }) {
    posted_.get_future().wait();
  }
  ~HoldingWorker() { End(); }
  // Closes the scope and joins the thread.
  void End() {
    if (!thread_.joinable()) return;
    end_.set_value();
    thread_.join();
  }

 private:
  std::promise<void> posted_, end_;
  std::thread thread_;  // last: starts once the promises exist
};

}  // namespace

TEST_CASE("completions posted by another thread run on the loop, in order", "[handoff]") {
  LoopFixture f;
  std::thread worker([&] {
    for (int i = 0; i < 3; ++i)
      f.handoff->PostToLoop([&f, i] { f.ran.push_back(i); });
  });
  worker.join();
  REQUIRE(f.RunOnce());
  CHECK(f.ran == std::vector<int>{0, 1, 2});
}

TEST_CASE("under a WakeOnce, posts wait for its end and then wake the loop once", "[handoff]") {
  LoopFixture f;
  HoldingWorker worker(f, {0, 1, 2});
  // Nothing woke the loop: the three completions are only queued.
  for (int i = 0; i < 5; ++i)
    f.RunReady();
  CHECK(f.ran.empty());
  worker.End();
  REQUIRE(f.RunOnce());  // the scope's end woke the loop
  CHECK(f.ran == std::vector<int>{0, 1, 2});
}

TEST_CASE("a WakeOnce holds back only its own thread's wake-ups", "[handoff]") {
  LoopFixture f;
  HoldingWorker worker(f, {1});
  // Another thread's post wakes the loop at once; the drain takes the queue
  // as it stands, the held-back completion first.
  std::thread other([&] { f.handoff->PostToLoop([&f] { f.ran.push_back(2); }); });
  other.join();
  REQUIRE(f.RunOnce());
  CHECK(f.ran == std::vector<int>{1, 2});
  worker.End();
  // The scope's end still wakes the loop, with nothing left to run.
  REQUIRE(f.RunOnce());
  CHECK(f.ran == std::vector<int>{1, 2});
}

TEST_CASE("TakeTasks returns the tasks queued so far, in order, without waiting", "[handoff]") {
  LoopFixture f;
  std::vector<int> ran;
  for (int i = 0; i < 3; ++i)
    f.handoff->PostToWorker([&ran, i] { ran.push_back(i); });
  bool stopped = true;
  auto tasks = f.handoff->TakeTasks(std::chrono::steady_clock::time_point::max(), &stopped);
  CHECK_FALSE(stopped);
  for (auto& task : tasks)
    task();
  CHECK(ran == std::vector<int>{0, 1, 2});
}

TEST_CASE("TakeTasks returns nothing at its deadline when nothing was posted", "[handoff]") {
  LoopFixture f;
  bool stopped = true;
  const auto start = std::chrono::steady_clock::now();
  CHECK(f.handoff->TakeTasks(start, &stopped).empty());  // a past deadline: no wait
  CHECK_FALSE(stopped);
  CHECK(f.handoff->TakeTasks(start + std::chrono::milliseconds(20), &stopped).empty());
  CHECK(std::chrono::steady_clock::now() - start >= std::chrono::milliseconds(20));
  CHECK_FALSE(stopped);
}

TEST_CASE("TakeTasks waits for a post from another thread, or for StopWorker", "[handoff]") {
  LoopFixture f;
  const auto forever = std::chrono::steady_clock::time_point::max();
  bool stopped = true;
  std::thread poster([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    f.handoff->PostToWorker([] {});
  });
  CHECK(f.handoff->TakeTasks(forever, &stopped).size() == 1);
  CHECK_FALSE(stopped);
  poster.join();

  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    f.handoff->StopWorker();
  });
  CHECK(f.handoff->TakeTasks(forever, &stopped).empty());
  CHECK(stopped);
  stopper.join();
  // Once stopped, it returns at once.
  CHECK(f.handoff->TakeTasks(forever, &stopped).empty());
  CHECK(stopped);
}

}  // namespace medq::daemon
