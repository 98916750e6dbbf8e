/* A stand-in for Windows' bcryptprimitives.dll, for wine only (Debian 12's wine 8 has no such
 * DLL; Windows 10 and newer do). Rust's standard library draws its random bytes
 * from ProcessPrng, which it imports from bcryptprimitives.dll, so without this no Rust
 * program starts under wine 8. tests/platforms/windows.sh builds it into the wine prefix's
 * system32, never into a package. Here ProcessPrng fills the buffer from BCryptGenRandom with
 * the system-preferred RNG, the source the real one wraps too. */
#include <windows.h>
#include <bcrypt.h>

__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len) {
  while (len > 0) {
    ULONG n = len > 0x40000000 ? 0x40000000 : (ULONG)len;
    if (BCryptGenRandom(NULL, data, n, BCRYPT_USE_SYSTEM_PREFERRED_RNG) != 0) return FALSE;
    data += n;
    len -= n;
  }
  return TRUE;
}
