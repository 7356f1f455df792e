package cluster

import (
	"log/slog"

	"k8s.io/klog/v2"
)

// bridgeKlog sends what client-go logs through klog (watch errors, leader
// election, event broadcasting) to pier's slog handler, so it has pier's
// level, format and attributes instead of klog's own header on stderr.
// klog is process-wide; connect calls this once, before the first client.
// klog's -v stays 0, so client-go's V(2)+ chatter is dropped even at
// --log-level debug.
func bridgeKlog(logger *slog.Logger) {
	klog.SetSlogLogger(logger.With("component", "client-go"))
}
