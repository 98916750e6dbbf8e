using System;
using System.Runtime.InteropServices;
using System.Text;

namespace QueueBox.Inbox
{
    /// <summary>P/Invoke declarations of queuebox.h (bindings/c). Only the callback
    /// variants are used: each returns at once and its callback fires on a runtime thread.</summary>
    internal static class Native
    {
        private const string Lib = "queuebox";

        [StructLayout(LayoutKind.Sequential)]
        internal struct QbError
        {
            public int Kind;
            public IntPtr KindName;
            public IntPtr Code;
            public IntPtr Message;
        }

        [StructLayout(LayoutKind.Sequential)]
        internal struct QbStats
        {
            public ulong Claimed, Completed, Retried, Dead, Released, ClaimsLost, ClaimErrors, InFlight;
        }

        [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
        internal delegate void WorkerCallback(IntPtr userData, int status, IntPtr worker, IntPtr error);
        [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
        internal delegate void TaskCallback(IntPtr userData, int status, IntPtr task, IntPtr messageJson, IntPtr error);
        [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
        internal delegate void CountCallback(IntPtr userData, int status, ulong count, IntPtr error);
        [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
        internal delegate void DoneCallback(IntPtr userData, int status, IntPtr error);
        [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
        internal delegate void StringCallback(IntPtr userData, int status, IntPtr json, IntPtr error);
        [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
        internal delegate void CancelCallback(IntPtr userData, [MarshalAs(UnmanagedType.I1)] bool cancelled);
        [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
        internal delegate void LogCallback(IntPtr userData, int level, IntPtr target, IntPtr message, IntPtr fieldsJson);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern void qb_error_free(IntPtr error);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern void qb_string_free(IntPtr s);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern IntPtr qb_status_name(int status);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern IntPtr qb_version();

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern int qb_runtime_new(uint threads, out IntPtr runtime, out IntPtr error);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern void qb_runtime_free(IntPtr runtime);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int qb_worker_new(IntPtr runtime, IntPtr url, IntPtr optionsJson, WorkerCallback cb, IntPtr userData, out IntPtr error);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern void qb_worker_free(IntPtr worker);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern int qb_worker_next(IntPtr worker, TaskCallback cb, IntPtr userData, out IntPtr error);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern int qb_worker_shutdown(IntPtr worker, CountCallback cb, IntPtr userData, out IntPtr error);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern int qb_worker_stats(IntPtr worker, out QbStats stats, out IntPtr error);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern int qb_worker_metrics_text(IntPtr worker, out IntPtr text, out IntPtr error);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern int qb_worker_handlers_took(IntPtr worker, ulong rows, double seconds, out IntPtr error);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern void qb_task_free(IntPtr task);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern int qb_task_on_cancelled(IntPtr task, CancelCallback cb, IntPtr userData, out IntPtr error);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int qb_task_execute(IntPtr task, IntPtr sql, IntPtr paramsJson, CountCallback cb, IntPtr userData, out IntPtr error);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int qb_task_query(IntPtr task, IntPtr sql, IntPtr paramsJson, StringCallback cb, IntPtr userData, out IntPtr error);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern int qb_task_complete(IntPtr task, DoneCallback cb, IntPtr userData, out IntPtr error);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern int qb_task_fail(IntPtr task, IntPtr errorText, DoneCallback cb, IntPtr userData, out IntPtr error);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int qb_task_retry(IntPtr task, ulong delayMs, IntPtr errorText, DoneCallback cb, IntPtr userData, out IntPtr error);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern int qb_task_dead(IntPtr task, IntPtr reason, DoneCallback cb, IntPtr userData, out IntPtr error);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern int qb_task_abandon(IntPtr task, DoneCallback cb, IntPtr userData, out IntPtr error);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern int qb_task_release_blocking(IntPtr task, out IntPtr error);

        // The application's own transaction: statements the wrapper runs with the
        // application's driver; synchronous, they do no I/O.
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int qb_task_completion_statement(IntPtr task, IntPtr placeholder, out IntPtr outJson, out IntPtr error);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern int qb_task_claim_lost(IntPtr task, out IntPtr error);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int qb_publish_statement(IntPtr backend, IntPtr messagesJson, IntPtr placeholder, out IntPtr outJson, out IntPtr error);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int qb_enqueue_statement(IntPtr backend, IntPtr messagesJson, IntPtr placeholder, out IntPtr outJson, out IntPtr error);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int qb_conformance_evaluate(IntPtr kind, IntPtr inputJson, out IntPtr outJson, out IntPtr error);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern int qb_set_log_callback(LogCallback cb, IntPtr userData, int minLevel, out IntPtr error);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern int qb_migrate(IntPtr runtime, IntPtr url, StringCallback cb, IntPtr userData, out IntPtr error);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)] internal static extern int qb_cancel(IntPtr runtime, IntPtr url, IntPtr table, IntPtr targetJson, StringCallback cb, IntPtr userData, out IntPtr error);

        /// <summary>A NUL-terminated UTF-8 copy of s in unmanaged memory; free with FreeUtf8.</summary>
        internal static IntPtr Utf8(string s)
        {
            if (s == null) return IntPtr.Zero;
            byte[] bytes = Encoding.UTF8.GetBytes(s);
            IntPtr p = Marshal.AllocHGlobal(bytes.Length + 1);
            Marshal.Copy(bytes, 0, p, bytes.Length);
            Marshal.WriteByte(p, bytes.Length, 0);
            return p;
        }

        internal static void FreeUtf8(IntPtr p)
        {
            if (p != IntPtr.Zero) Marshal.FreeHGlobal(p);
        }

        /// <summary>Reads a NUL-terminated UTF-8 string without freeing it.</summary>
        internal static string ReadUtf8(IntPtr p)
        {
            if (p == IntPtr.Zero) return null;
            int len = 0;
            while (Marshal.ReadByte(p, len) != 0) len++;
            return ReadUtf8(p, len);
        }

        /// <summary>Copies <paramref name="len"/> bytes of UTF-8 at <paramref name="p"/> into a string.</summary>
        internal static string ReadUtf8(IntPtr p, int len)
        {
            byte[] bytes = new byte[len];
            Marshal.Copy(p, bytes, 0, len);
            return Encoding.UTF8.GetString(bytes);
        }

        /// <summary>Reads and frees a string the library allocated.</summary>
        internal static string TakeString(IntPtr p)
        {
            if (p == IntPtr.Zero) return null;
            string s = ReadUtf8(p);
            qb_string_free(p);
            return s;
        }

        /// <summary>Turns a status and its error object into an exception (null for QB_OK),
        /// freeing the object.</summary>
        internal static QueueBoxException TakeError(int status, IntPtr error)
        {
            if (status == 0)
            {
                qb_error_free(error);
                return null;
            }
            string code = null, message = null;
            if (error != IntPtr.Zero)
            {
                QbError e = (QbError)Marshal.PtrToStructure(error, typeof(QbError));
                code = ReadUtf8(e.Code);
                message = ReadUtf8(e.Message);
                qb_error_free(error);
            }
            if (message == null) message = ReadUtf8(qb_status_name(status));
            return QueueBoxException.Create((QueueBoxErrorKind)status, code, message);
        }

        internal static void ThrowIfFailed(int status, IntPtr error)
        {
            QueueBoxException e = TakeError(status, error);
            if (e != null) throw e;
        }
    }
}
