// One fork-join helper for the native engine's CPU work that splits into independent parts (the step's
// outputs, a mask's candidate slices). Pure C++, no Node-API.
#pragma once

#include <cstddef>
#include <thread>
#include <vector>

namespace lmserve {

/**
 * Runs `body(0)` … `body(count - 1)` at once: part 0 on the calling thread, every other part on a thread
 * of its own, and returns when all are done (`count` 0 runs nothing, 1 starts no thread). The parts must
 * not share mutable state without their own synchronisation.
 */
template <typename Body>
void parallelFor(size_t count, const Body& body) {
  if (count == 0) return;
  std::vector<std::thread> threads;
  threads.reserve(count - 1);
  for (size_t part = 1; part < count; part++) threads.emplace_back([&body, part]() { body(part); });
  body(0);
  for (std::thread& thread : threads) thread.join();
}

}  // namespace lmserve
