// Generated owner ids: the owner of a call or session that named none
// (service/acquire_call.h, DefaultOwner) and the random part of the
// authorizer's owner_prefix owners (service/auth.h).
//
// Thread-safe: each thread draws from its own generator.

#ifndef LOCKD_SERVICE_OWNER_ID_H_
#define LOCKD_SERVICE_OWNER_ID_H_

#include <string>

namespace lockd {

// A random 128-bit owner id (32 hex digits).
std::string NewOwnerId();

}  // namespace lockd

#endif  // LOCKD_SERVICE_OWNER_ID_H_
