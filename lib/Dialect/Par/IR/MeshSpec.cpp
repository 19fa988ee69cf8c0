//===- MeshSpec.cpp - parsing --mesh values -------------------------------===//
#include "par/Dialect/Par/IR/MeshSpec.h"
#include "par/Runtime/Program.h"

#include <cctype>
#include <set>

using namespace mlir::par;

bool mlir::par::isPositionalMeshSpec(const std::string &spec) {
  return spec.find('=') == std::string::npos;
}

std::vector<std::string> mlir::par::defaultAxisNames(size_t numAxes) {
  static const char *const shortNames[] = {"x", "y", "z", "w"};
  std::vector<std::string> names;
  for (size_t i = 0; i < numAxes; ++i)
    names.push_back(numAxes <= 4 ? std::string(shortNames[i])
                                 : "a" + std::to_string(i));
  return names;
}

/// Parses a positive decimal axis size; false when `text` is not one.
static bool parseSize(const std::string &text, int64_t &size) {
  if (text.empty() || text.size() > 9)
    return false;
  for (char c : text)
    if (!std::isdigit(static_cast<unsigned char>(c)))
      return false;
  size = std::stoll(text);
  return size > 0;
}

static bool isAxisName(const std::string &name) {
  if (name.empty() ||
      !(std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_'))
    return false;
  for (char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_'))
      return false;
  return true;
}

static std::vector<std::string> split(const std::string &text, char sep) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t end = text.find(sep, start);
    parts.push_back(text.substr(start, end - start));
    if (end == std::string::npos)
      return parts;
    start = end + 1;
  }
}

bool mlir::par::parseMeshSpec(const std::string &spec,
                              std::vector<MeshAxisSpec> &axes,
                              std::string &error) {
  static const char *usage =
      "; expected sizes like 4x4x2 or named axes like dp=2,tp=4,pp=4";
  axes.clear();
  if (spec.empty()) {
    error = "empty mesh" + std::string(usage);
    return false;
  }
  // par-run's limit, checked before anything enumerates the devices.
  const int64_t maxDevices = ::par::rt::kMaxDevices;
  int64_t devices = 1;
  auto addAxis = [&](const std::string &name, int64_t size) {
    axes.push_back({name, size});
    if (size > maxDevices / devices) {
      error = "mesh has more than 2^20 devices, the most par-run runs";
      return false;
    }
    devices *= size;
    return true;
  };
  if (isPositionalMeshSpec(spec)) {
    std::vector<std::string> sizes = split(spec, 'x');
    std::vector<std::string> names = defaultAxisNames(sizes.size());
    for (size_t i = 0; i < sizes.size(); ++i) {
      int64_t size;
      if (!parseSize(sizes[i], size)) {
        error =
            "axis size '" + sizes[i] + "' is not a positive integer" + usage;
        return false;
      }
      if (!addAxis(names[i], size))
        return false;
    }
    return true;
  }
  std::set<std::string> seen;
  for (const std::string &entry : split(spec, ',')) {
    size_t eq = entry.find('=');
    if (eq == std::string::npos) {
      error = "'" + entry + "' is not of the form name=size" + usage;
      return false;
    }
    std::string name = entry.substr(0, eq), sizeText = entry.substr(eq + 1);
    if (!isAxisName(name)) {
      error = "'" + name +
              "' is not a valid axis name (letters, digits and '_', not "
              "starting with a digit)";
      return false;
    }
    if (!seen.insert(name).second) {
      error = "axis '" + name + "' is given twice";
      return false;
    }
    int64_t size;
    if (!parseSize(sizeText, size)) {
      error = "size '" + sizeText + "' of axis '" + name +
              "' is not a positive integer";
      return false;
    }
    if (!addAxis(name, size))
      return false;
  }
  return true;
}
