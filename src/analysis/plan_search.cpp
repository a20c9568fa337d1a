// Choosing the groups: the objective is a sum of per-group costs (plan_layer.cpp), so the best
// equal partition is found exactly by enumeration with branch and bound when the partitions are
// few (H = 8 in pairs: 105; H = 16 in pairs: 2 027 025), else by local search — swapping two heads
// of different groups while that lowers the cost — from the contiguous partition and seeded
// random ones. Group costs are memoised: a group is aligned once however often it is visited.
#include <algorithm>
#include <limits>
#include <numeric>
#include <random>
#include <unordered_map>

#include "analysis/plan_detail.hpp"

namespace kvrank {

long long equal_partition_count(int n, int size) {
  // n! / ((size!)^(n/size) (n/size)!) = Π over groups of C(remaining − 1, size − 1).
  constexpr long long kSaturated = 1LL << 62;
  long long count = 1;
  for (int remaining = n; remaining > 0; remaining -= size) {
    long long choose = 1;  // C(remaining − 1, size − 1), saturating
    for (int k = 1; k < size; ++k) {
      const long long top = remaining - k;
      if (choose > kSaturated / top) return kSaturated;
      choose = choose * top / k;
    }
    if (count > kSaturated / choose) return kSaturated;
    count *= choose;
  }
  return count;
}

namespace detail {
namespace {

struct GroupHash {
  std::size_t operator()(const std::vector<int>& group) const noexcept {
    std::size_t hash = 1469598103934665603ULL;
    for (int member : group) hash = (hash ^ static_cast<std::size_t>(member)) * 1099511628211ULL;
    return hash;
  }
};

class MemoCost {
 public:
  explicit MemoCost(const GroupCost& cost) : cost_(cost) {}
  double operator()(const std::vector<int>& group) {
    auto found = memo_.find(group);
    if (found != memo_.end()) return found->second;
    const double value = cost_(group);
    memo_.emplace(group, value);
    return value;
  }
  double total(const Partition& partition) {
    double sum = 0;
    for (const auto& group : partition) sum += (*this)(group);
    return sum;
  }

 private:
  const GroupCost& cost_;
  std::unordered_map<std::vector<int>, double, GroupHash> memo_;
};

/// Depth-first enumeration: the lowest unused head opens a group, completed by every choice of
/// size − 1 higher unused heads; a branch whose partial cost reaches the best so far is cut.
class Enumeration {
 public:
  Enumeration(int n, int size, MemoCost& cost) : n_(n), size_(size), cost_(cost), used_(n) {}

  Partition run() {
    open_group(0.0);
    return best_;
  }

 private:
  void open_group(double partial) {
    const auto first = std::find(used_.begin(), used_.end(), false);
    if (first == used_.end()) {
      if (partial < best_cost_) {
        best_cost_ = partial;
        best_ = current_;
      }
      return;
    }
    const int head = static_cast<int>(first - used_.begin());
    used_[head] = true;
    current_.push_back({head});
    extend(head + 1, partial);
    current_.pop_back();
    used_[head] = false;
  }

  // current_.back() is looked up afresh each time: open_group() below grows current_, which may
  // move the groups.
  void extend(int from, double partial) {
    if (static_cast<int>(current_.back().size()) == size_) {
      const double with = partial + cost_(current_.back());
      if (with < best_cost_) open_group(with);
      return;
    }
    for (int head = from; head < n_; ++head) {
      if (used_[head]) continue;
      used_[head] = true;
      current_.back().push_back(head);
      extend(head + 1, partial);
      current_.back().pop_back();
      used_[head] = false;
    }
  }

  int n_, size_;
  MemoCost& cost_;
  std::vector<bool> used_;
  Partition current_, best_;
  double best_cost_ = std::numeric_limits<double>::infinity();
};

/// Swaps of two heads between groups, the best swap of each pass, until none lowers the cost.
void improve(Partition& partition, MemoCost& cost) {
  for (bool improved = true; improved;) {
    improved = false;
    double best_delta = -1e-15;
    Partition best_move;
    for (std::size_t a = 0; a < partition.size(); ++a)
      for (std::size_t b = a + 1; b < partition.size(); ++b) {
        const double before = cost(partition[a]) + cost(partition[b]);
        for (std::size_t x = 0; x < partition[a].size(); ++x)
          for (std::size_t y = 0; y < partition[b].size(); ++y) {
            Partition moved = partition;
            std::swap(moved[a][x], moved[b][y]);
            std::sort(moved[a].begin(), moved[a].end());
            std::sort(moved[b].begin(), moved[b].end());
            const double delta = cost(moved[a]) + cost(moved[b]) - before;
            if (delta < best_delta) {
              best_delta = delta;
              best_move = std::move(moved);
            }
          }
      }
    if (!best_move.empty()) {
      partition = std::move(best_move);
      improved = true;
    }
  }
}

}  // namespace

void normalise(Partition& partition) {
  for (auto& group : partition) std::sort(group.begin(), group.end());
  std::sort(partition.begin(), partition.end());
}

Partition contiguous_partition(int n, int size) {
  Partition partition(n / size);
  for (int head = 0; head < n; ++head) partition[head / size].push_back(head);
  return partition;
}

std::vector<Partition> random_partitions(int n, int size, int count, std::uint64_t seed) {
  std::mt19937_64 generator(seed);
  std::vector<Partition> partitions;
  for (int draw = 0; draw < count; ++draw) {
    std::vector<int> order(n);
    std::iota(order.begin(), order.end(), 0);
    for (int i = n - 1; i > 0; --i)  // Fisher–Yates with the raw generator: portable
      std::swap(order[i], order[generator() % static_cast<std::uint64_t>(i + 1)]);
    Partition partition(n / size);
    for (int i = 0; i < n; ++i) partition[i / size].push_back(order[i]);
    normalise(partition);
    partitions.push_back(std::move(partition));
  }
  return partitions;
}

Partition best_partition(int n, int size, const GroupCost& cost, long long exact_limit,
                         int restarts, std::uint64_t seed, bool& exact) {
  MemoCost memo(cost);
  exact = equal_partition_count(n, size) <= exact_limit;
  if (exact) {
    Partition best = Enumeration(n, size, memo).run();
    normalise(best);
    return best;
  }
  std::vector<Partition> starts = random_partitions(n, size, restarts, seed);
  starts.insert(starts.begin(), contiguous_partition(n, size));
  Partition best;
  double best_cost = std::numeric_limits<double>::infinity();
  for (Partition& start : starts) {
    improve(start, memo);
    const double total = memo.total(start);
    if (total < best_cost) {
      best_cost = total;
      best = start;
    }
  }
  normalise(best);
  return best;
}

}  // namespace detail
}  // namespace kvrank
