//! What every export goes through: the panic guard, argument and out-parameter checks, the
//! blocking and the callback paths (a callback's value freed when there is no callback), the
//! NULL-safe release every `qb_*_free` shares, and the library's string buffers.

use std::ffi::{c_char, c_void, CStr, CString};
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;

use futures::FutureExt;
use tokio::runtime::Handle;

use crate::error::{write_error, Failure, QbError, QbStatus};

pub(crate) type Outcome<T> = Result<T, Failure>;

/// Runs the body of a synchronous export behind the panic guard: clears `*out_error`,
/// turns an error or a panic into a status and an error object.
pub(crate) fn guard(out_error: *mut *mut QbError, body: impl FnOnce() -> Outcome<()>) -> QbStatus {
    if !out_error.is_null() {
        // SAFETY: the caller passes a writable `QbError**` or NULL.
        unsafe { *out_error = ptr::null_mut() };
    }
    let failure = match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => return QbStatus::QB_OK,
        Ok(Err(f)) => f,
        Err(panic) => Failure::panic(panic),
    };
    let status = failure.status;
    write_error(out_error, failure);
    status
}

/// A raw pointer that crosses to a runtime thread. The caller promised (proto-docs/ffi.md)
/// that `user_data` stays valid until its callback fired.
pub(crate) struct SendPtr(pub *mut c_void);
// SAFETY: the library never dereferences user_data; it only hands it back to the callback.
unsafe impl Send for SendPtr {}

/// Runs `fut` on the runtime and hands its result to `deliver` on a runtime thread. A
/// panic inside `fut` becomes `QB_ERR_INTERNAL`, so the callback always fires exactly once.
pub(crate) fn spawn<T, F, D>(handle: &Handle, fut: F, deliver: D)
where
    T: Send + 'static,
    F: Future<Output = Outcome<T>> + Send + 'static,
    D: FnOnce(QbStatus, Option<T>, *mut QbError) + Send + 'static,
{
    handle.spawn(async move {
        let r = match AssertUnwindSafe(fut).catch_unwind().await {
            Ok(r) => r,
            Err(panic) => Err(Failure::panic(panic)),
        };
        let _ = catch_unwind(AssertUnwindSafe(move || match r {
            Ok(v) => deliver(QbStatus::QB_OK, Some(v), ptr::null_mut()),
            Err(f) => deliver(f.status, None, f.into_raw()),
        }));
    });
}

/// What a callback receives and owns from then on. With no callback nobody takes it, so the
/// library releases it itself ([`Reply::send`]).
pub(crate) trait Handover {
    /// Releases a value no callback took.
    ///
    /// # Safety
    /// `self` was made for a callback and handed to nobody.
    unsafe fn unclaimed(self);
}

/// Counts and statuses own nothing.
impl Handover for u64 {
    unsafe fn unclaimed(self) {}
}

impl Handover for () {
    unsafe fn unclaimed(self) {}
}

impl Handover for Vec<QbStatus> {
    unsafe fn unclaimed(self) {}
}

/// A library string (`into_c_string`, or NULL).
impl Handover for *mut c_char {
    unsafe fn unclaimed(self) {
        qb_string_free(self)
    }
}

/// The caller's callback and its `user_data`, on their way to the runtime thread that fires
/// the callback, once.
pub(crate) struct Reply<C> {
    callback: Option<C>,
    user_data: SendPtr,
}

impl<C> Reply<C> {
    pub(crate) fn new(callback: Option<C>, user_data: *mut c_void) -> Self {
        Reply {
            callback,
            user_data: SendPtr(user_data),
        }
    }

    /// Fires the callback through `call` (which knows its parameters) with `user_data`; with
    /// no callback, releases `value` and `error`, which nobody else would.
    ///
    /// # Safety
    /// The callback and `user_data` are the caller's, valid until the callback fired.
    pub(crate) unsafe fn send<V: Handover>(
        self,
        status: QbStatus,
        value: V,
        error: *mut QbError,
        call: impl FnOnce(C, *mut c_void, QbStatus, V, *mut QbError),
    ) {
        match self.callback {
            Some(cb) => call(cb, self.user_data.0, status, value, error),
            None => {
                value.unclaimed();
                crate::error::qb_error_free(error);
            }
        }
    }
}

/// [`spawn`] for an export with a callback: `fut`'s result, made a C value by `to_c`, goes
/// to `reply` on a runtime thread.
pub(crate) fn spawn_reply<T, F, V, C>(
    handle: &Handle,
    fut: F,
    reply: Reply<C>,
    to_c: impl FnOnce(Option<T>) -> V + Send + 'static,
    call: impl FnOnce(C, *mut c_void, QbStatus, V, *mut QbError) + Send + 'static,
) where
    T: Send + 'static,
    F: Future<Output = Outcome<T>> + Send + 'static,
    V: Handover,
    C: Send + 'static,
{
    // SAFETY: the export's caller promised a valid callback and user_data (proto-docs/ffi.md).
    spawn(handle, fut, move |st, v, err| unsafe {
        reply.send(st, to_c(v), err, call)
    });
}

/// Runs `fut` to completion on the calling thread. Refused on a runtime thread (inside a
/// callback), where blocking would stall or deadlock the runtime.
pub(crate) fn block<T>(handle: &Handle, fut: impl Future<Output = Outcome<T>>) -> Outcome<T> {
    if Handle::try_current().is_ok() {
        return Err(Failure::invalid(
            "a blocking qb_*_blocking call was made on a runtime thread (from a callback); use the callback variant there",
        ));
    }
    handle.block_on(fut)
}

/// `&T` from a handle pointer, or an error naming the argument.
pub(crate) fn handle_ref<'a, T>(p: *const T, what: &str) -> Outcome<&'a T> {
    // SAFETY: non-NULL handles are pointers the library returned and the caller has not freed.
    unsafe { p.as_ref() }.ok_or_else(|| Failure::invalid(format!("{what} is NULL")))
}

/// A UTF-8 string argument, or an error naming it.
pub(crate) fn str_arg<'a>(p: *const c_char, what: &str) -> Outcome<&'a str> {
    if p.is_null() {
        return Err(Failure::invalid(format!("{what} is NULL")));
    }
    // SAFETY: the caller passes a NUL-terminated string that lives for the call.
    unsafe { CStr::from_ptr(p) }
        .to_str()
        .map_err(|_| Failure::invalid(format!("{what} is not valid UTF-8")))
}

/// An optional UTF-8 string argument (NULL → None).
pub(crate) fn opt_str_arg<'a>(p: *const c_char, what: &str) -> Outcome<Option<&'a str>> {
    if p.is_null() {
        Ok(None)
    } else {
        str_arg(p, what).map(Some)
    }
}

/// A required out-parameter, checked non-NULL; [`Out::put`] writes it.
pub(crate) struct Out<T>(*mut T);

impl<T> Out<T> {
    /// Writes `value` without reading what the storage held before.
    pub(crate) fn put(self, value: T) {
        // SAFETY: `out_arg` let only non-NULL out-parameters through, and those point at
        // writable storage for one T.
        unsafe { self.0.write(value) }
    }
}

/// A required out-parameter, or an error naming it. Taken before the call does its work, so
/// that a NULL out-parameter fails the call without running it (and losing its result).
pub(crate) fn out_arg<T>(out: *mut T, what: &str) -> Outcome<Out<T>> {
    if out.is_null() {
        return Err(Failure::invalid(format!("{what} is NULL")));
    }
    Ok(Out(out))
}

/// Writes `value` through a required out-parameter, or fails when the pointer is NULL.
pub(crate) fn write_out<T>(out: *mut T, value: T, what: &str) -> Outcome<()> {
    out_arg(out, what)?.put(value);
    Ok(())
}

/// Writes an optional out-parameter when the caller passed one; `value` is made only then,
/// so nothing is allocated for a caller who did not ask.
pub(crate) fn write_opt_out<T>(out: *mut T, value: impl FnOnce() -> T) {
    if !out.is_null() {
        // SAFETY: non-NULL out-parameters point at writable storage for one T.
        unsafe { out.write(value()) };
    }
}

/// Clears an optional out-parameter so that it never holds garbage after a failure.
pub(crate) fn clear_out<T>(out: *mut *mut T) {
    if !out.is_null() {
        // SAFETY: as in write_out.
        unsafe { *out = ptr::null_mut() };
    }
}

/// A library-allocated, NUL-terminated UTF-8 string for the caller (`qb_string_free`).
pub(crate) fn into_c_string(s: String) -> *mut c_char {
    crate::error::cstring(s).into_raw()
}

/// What every `qb_*_free` does around its own release: NULL is ignored, and a panic while
/// releasing stays inside the library (a free returns nothing to report it with).
///
/// # Safety
/// `p` is NULL or a pointer the library handed out and the caller has not freed.
pub(crate) unsafe fn release<T>(p: *mut T, free: impl FnOnce(*mut T)) {
    if !p.is_null() {
        let _ = catch_unwind(AssertUnwindSafe(|| free(p)));
    }
}

/// Releases a string returned by the library (message JSON, query rows, vector output).
/// NULL is ignored.
///
/// # Safety
/// `s` is NULL or a string the library returned and not yet freed.
#[no_mangle]
pub unsafe extern "C" fn qb_string_free(s: *mut c_char) {
    release(s, |s| drop(CString::from_raw(s)));
}
