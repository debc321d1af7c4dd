// Configuration keys bound to the members of an options struct, so that each
// option is declared once: a backend's `<name>_options.cc` binds its keys to
// the members of its own options struct, whose member initializers are the
// defaults, and service/config.cc turns the bindings into the YAML keys, the
// flags, the environment variables and `lockd --help` (config.h explains the
// mapping). Example, in backends/redis/redis_options.cc:
//
//   s->Duration("redis.command_timeout", &O::command_timeout, "Redis command timeout");
//
// Value syntax is the same for every key: integers in a stated range;
// durations like 250ms, 30s, 5m or 1h (finite; not negative, or positive, or
// at least a stated minimum, as the binder says); booleans `true` or
// `false`; enumerations one of their listed names.
//
// Ranges are declared once, in the binders: parsing a key checks its value,
// and Check() checks a whole options struct (also one built in code, never
// parsed), which is the first thing each backend's New*Backend does.
// Members with a range but no key in a set (a value set in code or by a key
// declared elsewhere) are bound with UnkeyedInt / UnkeyedDuration, which
// only Check() sees. Members several backends share are bound once, in
// backends/common/shared_options.h.
//
// Thread-compatible: an OptionSet is built once (usually into a function-local
// static) and only read afterwards; reading from several threads is safe.

#ifndef LOCKD_BACKENDS_COMMON_OPTIONS_H_
#define LOCKD_BACKENDS_COMMON_OPTIONS_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/numeric/int128.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"

namespace lockd {

// The value parsers and range checks behind every binding. Errors are
// kInvalidArgument saying what was expected and what was given ("expected an
// integer in [1, 1024], got \"x\""); the caller prefixes where the value
// came from (a key, a flag, a variable).
absl::Status ParseIntOption(const std::string& text, int64_t min, int64_t max, int64_t* out);
absl::Status ParseBoolOption(const std::string& text, bool* out);
// A value outside [min, max]; `text` is the value as given.
absl::Status IntRangeError(int64_t min, int64_t max, const std::string& text);

// The durations a binding accepts: finite and at least `min`; `positive`
// also refuses zero.
struct DurationRange {
  absl::Duration min = absl::ZeroDuration();
  bool positive = false;
};
absl::Status ParseDurationOption(const std::string& text, DurationRange range, absl::Duration* out);
absl::Status CheckDurationOption(absl::Duration d, DurationRange range);

// The error of an enumeration that was given none of `names`.
absl::Status NotOneOf(const std::vector<std::string>& names, const std::string& text);

// Reads a secret file (password_file options): its first line, without the
// line end and trailing blanks. The error (kInvalidArgument) names the file,
// never its contents.
absl::StatusOr<std::string> ReadSecretFile(const std::string& path);

// The configuration keys of the options struct T, in the order `--help`
// lists them.
template <typename T>
class OptionSet {
 public:
  struct Binding {
    std::string key;      // "redis.addresses": YAML key, flag and variable
    std::string help;     // one line for --help
    bool secret = false;  // the value never appears in an error
    // Parses `text` into the member; leaves it unchanged on error.
    std::function<absl::Status(T&, const std::string&)> set;
    // The member as text that `set` accepts (--help shows it as the default).
    std::function<std::string(const T&)> get;
  };

  OptionSet& String(std::string key, std::string T::*member, std::string help) {
    return Add(
        std::move(key), std::move(help), false,
        [member](T& t, const std::string& v) {
          t.*member = v;
          return absl::OkStatus();
        },
        [member](const T& t) { return t.*member; });
  }

  // A string that is never echoed in an error.
  OptionSet& Secret(std::string key, std::string T::*member, std::string help) {
    String(std::move(key), member, std::move(help));
    bindings_.back().secret = true;
    return *this;
  }

  // An integer member of any integral type, accepted in [min, max].
  template <typename I>
  OptionSet& Int(std::string key, I T::*member, int64_t min, int64_t max, std::string help) {
    UnkeyedInt(key, member, min, max);
    return Add(
        std::move(key), std::move(help), false,
        [=](T& t, const std::string& v) {
          int64_t n = 0;
          absl::Status s = ParseIntOption(v, min, max, &n);
          if (s.ok()) t.*member = static_cast<I>(n);
          return s;
        },
        [member](const T& t) { return absl::StrCat(t.*member); });
  }

  // A duration member: not negative; PositiveDuration refuses zero too;
  // DurationAtLeast refuses less than `min`.
  OptionSet& Duration(std::string key, absl::Duration T::*member, std::string help) {
    return DurationIn(std::move(key), member, DurationRange{}, std::move(help));
  }
  OptionSet& PositiveDuration(std::string key, absl::Duration T::*member, std::string help) {
    return DurationIn(std::move(key), member, DurationRange{absl::ZeroDuration(), true},
                      std::move(help));
  }
  OptionSet& DurationAtLeast(std::string key, absl::Duration T::*member, absl::Duration min,
                             std::string help) {
    return DurationIn(std::move(key), member, DurationRange{min, false}, std::move(help));
  }

  // A member with a range but no key in this set, named `name` in Check()'s
  // errors: Check() alone looks at it.
  template <typename I>
  OptionSet& UnkeyedInt(std::string name, I T::*member, int64_t min, int64_t max) {
    static_assert(std::is_integral_v<I> && !std::is_same_v<I, bool>, "use Bool");
    checks_.push_back({std::move(name), [=](const T& t) {
                         const absl::int128 n = t.*member;
                         if (n >= min && n <= max) return absl::OkStatus();
                         return IntRangeError(min, max, absl::StrCat(t.*member));
                       }});
    return *this;
  }
  OptionSet& UnkeyedDuration(std::string name, absl::Duration T::*member,
                             DurationRange range = {}) {
    checks_.push_back(
        {std::move(name), [=](const T& t) { return CheckDurationOption(t.*member, range); }});
    return *this;
  }

  OptionSet& Bool(std::string key, bool T::*member, std::string help) {
    return Add(
        std::move(key), std::move(help), false,
        [member](T& t, const std::string& v) { return ParseBoolOption(v, &(t.*member)); },
        [member](const T& t) { return std::string(t.*member ? "true" : "false"); });
  }

  // A member that takes one of the named values (an enum, or a string
  // restricted to `OneOf` its spellings).
  template <typename E>
  OptionSet& Enum(std::string key, E T::*member, std::vector<std::pair<std::string, E>> names,
                  std::string help) {
    return Add(
        std::move(key), std::move(help), false,
        [=](T& t, const std::string& v) {
          std::vector<std::string> spellings;
          for (const auto& [name, value] : names) {
            if (name == v) {
              t.*member = value;
              return absl::OkStatus();
            }
            spellings.push_back(name);
          }
          return NotOneOf(spellings, v);
        },
        [=](const T& t) {
          for (const auto& [name, value] : names) {
            if (value == t.*member) return name;
          }
          return std::string();
        });
  }

  OptionSet& OneOf(std::string key, std::string T::*member, const std::vector<std::string>& names,
                   std::string help) {
    std::vector<std::pair<std::string, std::string>> pairs;
    for (const std::string& n : names) pairs.emplace_back(n, n);
    return Enum(std::move(key), member, std::move(pairs), std::move(help));
  }

  // A key whose parsing no binder above covers.
  OptionSet& Custom(std::string key, std::string help,
                    std::function<absl::Status(T&, const std::string&)> set,
                    std::function<std::string(const T&)> get) {
    return Add(std::move(key), std::move(help), false, std::move(set), std::move(get));
  }

  // A password and the file it may come from instead: `password_key` binds
  // `password` (a Secret), `file_key` binds `file`. Resolve() reads the file
  // into `password`; setting both keys is an error naming both.
  OptionSet& Password(std::string password_key, std::string T::*password, std::string password_help,
                      std::string file_key, std::string T::*file, std::string file_help) {
    Secret(password_key, password, std::move(password_help));
    String(file_key, file, std::move(file_help));
    resolvers_.push_back([=](T& t) {
      if ((t.*file).empty()) return absl::OkStatus();
      if (!(t.*password).empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat(file_key, ": ", password_key, " is set too; use one of them"));
      }
      return ReadInto(file_key, t.*file, nullptr, "", &(t.*password));
    });
    return *this;
  }

  // A file holding a secret that has no key of its own (`secret`): Resolve()
  // reads it and checks it with `well_formed`, whose expectation `form`
  // names ("user:password").
  OptionSet& SecretFile(std::string key, std::string T::*file, std::string T::*secret,
                        std::function<bool(const std::string&)> well_formed, std::string form,
                        std::string help) {
    String(key, file, std::move(help));
    resolvers_.push_back([=](T& t) {
      if ((t.*file).empty()) return absl::OkStatus();
      return ReadInto(key, t.*file, well_formed, form, &(t.*secret));
    });
    return *this;
  }

  // Adds the keys and range checks of `part`, an options struct held in T's
  // member `member`. Resolve() of this set does not run `part`'s resolvers.
  template <typename Part>
  OptionSet& Include(Part T::*member, const OptionSet<Part>& part) {
    for (const auto& b : part.bindings()) {
      auto set = b.set;
      auto get = b.get;
      Add(
          b.key, b.help, b.secret,
          [member, set](T& t, const std::string& v) { return set(t.*member, v); },
          [member, get](const T& t) { return get(t.*member); });
    }
    for (const auto& c : part.checks_) {
      auto check = c.check;
      checks_.push_back({c.name, [member, check](const T& t) { return check(t.*member); }});
    }
    return *this;
  }

  const std::vector<Binding>& bindings() const { return bindings_; }

  // The binding of `key`, or null.
  const Binding* Find(const std::string& key) const {
    for (const Binding& b : bindings_) {
      if (b.key == key) return &b;
    }
    return nullptr;
  }

  // Checks every ranged member of `options` (Int, the Duration binders, the
  // Unkeyed ones) against its range. Error: kInvalidArgument "<key>:
  // expected ..., got \"<value>\"" for the first member out of range.
  absl::Status Check(const T& options) const {
    for (const RangeCheck& c : checks_) {
      absl::Status s = c.check(options);
      if (!s.ok()) return absl::InvalidArgumentError(absl::StrCat(c.name, ": ", s.message()));
    }
    return absl::OkStatus();
  }

  // Reads the secret files that `options` names (Password, SecretFile) into
  // their secret members. Called once, just before the options are used.
  // Errors: kInvalidArgument naming the key: a password and its file both
  // set; an unreadable file; a malformed secret (never shown).
  absl::Status Resolve(T* options) const {
    for (const auto& r : resolvers_) {
      absl::Status s = r(*options);
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }

 private:
  template <typename>
  friend class OptionSet;  // Include() reads the part's checks_

  struct RangeCheck {
    std::string name;  // the key, or an unkeyed member's name
    std::function<absl::Status(const T&)> check;
  };

  OptionSet& DurationIn(std::string key, absl::Duration T::*member, DurationRange range,
                        std::string help) {
    UnkeyedDuration(key, member, range);
    return Add(
        std::move(key), std::move(help), false,
        [=](T& t, const std::string& v) { return ParseDurationOption(v, range, &(t.*member)); },
        [member](const T& t) { return absl::FormatDuration(t.*member); });
  }

  OptionSet& Add(std::string key, std::string help, bool secret,
                 std::function<absl::Status(T&, const std::string&)> set,
                 std::function<std::string(const T&)> get) {
    bindings_.push_back({std::move(key), std::move(help), secret, std::move(set), std::move(get)});
    return *this;
  }

  static absl::Status ReadInto(const std::string& key, const std::string& path,
                               const std::function<bool(const std::string&)>& well_formed,
                               const std::string& form, std::string* secret) {
    absl::StatusOr<std::string> text = ReadSecretFile(path);
    if (!text.ok())
      return absl::InvalidArgumentError(absl::StrCat(key, ": ", text.status().message()));
    if (well_formed && !well_formed(*text)) {
      return absl::InvalidArgumentError(absl::StrCat(key, ": ", path, " must hold ", form));
    }
    *secret = *std::move(text);
    return absl::OkStatus();
  }

  std::vector<Binding> bindings_;
  std::vector<RangeCheck> checks_;
  std::vector<std::function<absl::Status(T&)>> resolvers_;
};

}  // namespace lockd

#endif  // LOCKD_BACKENDS_COMMON_OPTIONS_H_
