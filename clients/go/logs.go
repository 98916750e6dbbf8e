package queuebox

import "C"

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"sort"
	"sync"
	"unsafe"
)

// The native library's log records (claim failures, an unreachable database, lost claims,
// retries, dead-lettered messages, dead-owner recovery) go to log/slog. A record carrying
// the "source" field of a worker made with Options.Logger goes to that logger; every other
// record goes to the logger set by SetLogger, or slog.Default(). The fields of the record
// (message_id, source, topic, attempt, error, ...) become slog attributes, with "target"
// naming the emitting module.

// QbLogLevel values (queuebox.h).
const (
	nativeLogError = 1
	nativeLogWarn  = 2
	nativeLogInfo  = 3
	nativeLogDebug = 4
)

var logs struct {
	sync.RWMutex
	fallback *slog.Logger              // SetLogger; nil means slog.Default()
	bySource map[string][]*slog.Logger // workers' Options.Logger, newest last
}

var (
	installMu      sync.Mutex
	installedLevel int // the minimum installed in the library; 0 before the first install
)

// SetLogger sets the logger for the library's records that belong to no worker with its
// own Options.Logger; nil restores slog.Default().
func SetLogger(l *slog.Logger) {
	logs.Lock()
	logs.fallback = l
	logs.Unlock()
	installLogForwarding()
}

// registerLogger routes records of source to l until the returned function is called.
func registerLogger(source string, l *slog.Logger) (unregister func()) {
	if l != nil {
		logs.Lock()
		if logs.bySource == nil {
			logs.bySource = map[string][]*slog.Logger{}
		}
		logs.bySource[source] = append(logs.bySource[source], l)
		logs.Unlock()
	}
	installLogForwarding()
	return func() {
		if l == nil {
			return
		}
		logs.Lock()
		defer logs.Unlock()
		list := logs.bySource[source]
		for i, x := range list {
			if x == l {
				logs.bySource[source] = append(list[:i:i], list[i+1:]...)
				break
			}
		}
		if len(logs.bySource[source]) == 0 {
			delete(logs.bySource, source)
		}
	}
}

// installLogForwarding (re)installs the library's callback at the lowest level any of the
// loggers wants: debug when one of them is enabled for it, else info. The library waits for
// running callbacks when the callback is replaced, and a running callback takes logs'
// read lock, so logs is not held across that call (installMu orders the installs).
func installLogForwarding() {
	installMu.Lock()
	defer installMu.Unlock()
	want := nativeLogInfo
	logs.RLock()
	all := []*slog.Logger{logs.fallback}
	for _, list := range logs.bySource {
		all = append(all, list...)
	}
	logs.RUnlock()
	for _, l := range all {
		if l == nil {
			l = slog.Default()
		}
		if l.Enabled(context.Background(), slog.LevelDebug) {
			want = nativeLogDebug
		}
	}
	if want == installedLevel {
		return
	}
	if err := setNativeLogLevel(want); err != nil {
		slog.Default().Warn("queuebox: cannot forward the native library's logs", "error", err)
		return
	}
	installedLevel = want
}

func slogLevel(level int) slog.Level {
	switch level {
	case nativeLogError:
		return slog.LevelError
	case nativeLogWarn:
		return slog.LevelWarn
	case nativeLogInfo:
		return slog.LevelInfo
	case nativeLogDebug:
		return slog.LevelDebug
	default:
		return slog.LevelDebug - 4 // trace
	}
}

// loggerFor picks the logger of a record's source.
func loggerFor(source string) *slog.Logger {
	logs.RLock()
	defer logs.RUnlock()
	if list := logs.bySource[source]; len(list) > 0 {
		return list[len(list)-1]
	}
	if logs.fallback != nil {
		return logs.fallback
	}
	return slog.Default()
}

// queueboxGoLog receives one record from the library, on whichever thread logged it. The
// strings are the library's and live only for this call: C.GoString copies them.
//
//export queueboxGoLog
func queueboxGoLog(_ unsafe.Pointer, level C.int, target, message, fields *C.char) {
	var attrs map[string]any
	dec := json.NewDecoder(bytes.NewReader([]byte(C.GoString(fields))))
	dec.UseNumber()
	_ = dec.Decode(&attrs)
	source, _ := attrs["source"].(string)
	keys := make([]string, 0, len(attrs))
	for k := range attrs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	args := make([]any, 0, len(attrs)+1)
	args = append(args, slog.String("target", C.GoString(target)))
	for _, k := range keys {
		args = append(args, slog.Any(k, attrs[k]))
	}
	loggerFor(source).Log(context.Background(), slogLevel(int(level)), C.GoString(message), args...)
}
