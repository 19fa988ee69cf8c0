//===- Agreement.cpp - Failures every rank agrees on ----------------------===//

#include "par/Runtime/Agreement.h"

#include <cctype>

namespace par::rt {

bool namesRank(const std::string &message, int64_t rank) {
  std::string prefix = "rank " + std::to_string(rank);
  return message.rfind(prefix, 0) == 0 &&
         (message.size() == prefix.size() ||
          !std::isdigit((unsigned char)message[prefix.size()]));
}

void agreeOnErrors(Collectives &comm, const std::function<void()> &fn,
                   bool nameRank) {
  std::string message;
  try {
    fn();
  } catch (const std::exception &e) {
    message = *e.what() ? e.what() : "failed";
  }
  std::vector<int64_t> failed = {message.empty() ? 0 : 1};
  comm.agree(failed, ReduceOp::Sum);
  if (!failed[0])
    return;
  std::vector<std::string> all = comm.gatherToRoot(message);
  if (comm.worldRank() != 0)
    throw ReportedElsewhere();
  for (size_t r = 0; r < all.size(); ++r)
    if (!all[r].empty()) {
      bool prefix = nameRank && !namesRank(all[r], int64_t(r));
      throw AgreedError((prefix ? "rank " + std::to_string(r) + ": " : "") +
                        all[r] +
                        (failed[0] > 1 ? " (" + std::to_string(failed[0] - 1) +
                                             " more rank(s) failed too)"
                                       : ""));
    }
}

} // namespace par::rt
