package render

import (
	"bytes"
	"errors"
	"fmt"

	"pier.dev/pier/internal/encode"
)

// DefaultMaxConfigBytes is Options.MaxConfigBytes when unset. A route
// with its own 16-slot pool renders to about 1.6 KB (measured), so 16 MiB
// holds some 10,000 of them in one LoadBalancer: a group that large is
// refused rather than reloaded.
const DefaultMaxConfigBytes = 16 << 20

// ErrConfigTooLarge is returned (wrapped) for a LoadBalancer whose
// haproxy.conf would exceed Options.MaxConfigBytes.
var ErrConfigTooLarge = errors.New("configuration too large")

// MaxLineBytes bounds every line pier writes to haproxy.conf. HAProxy
// 2.6 starts reading with a 2048-byte buffer (LINESIZE) and doubles it
// for a longer line (measured: a 1.1 MB line loads; TestIntegrationLongestHeaders
// loads and serves pier's longest), so the bound is ours. It must hold
// the longest line translation can ask for: a header change carrying a
// value of encode.MaxHeaderValueLen (4 KiB) with a name of
// encode.MaxHeaderNameLen, about 4.3 KB. An acl carrying a 1024-byte
// path, or a policy ANDing 59 ACL names, stays under 4.2 KB.
const MaxLineBytes = 8192

// checkLimits refuses a rendered file that is too large, or has a line
// longer than MaxLineBytes. Word counts need no check here: every line
// came through encode.ConfigLine, which refuses more than
// encode.MaxLineArgs words, and each Word is exactly one HAProxy word.
func checkLimits(cfg []byte, maxBytes int) error {
	if len(cfg) > maxBytes {
		return fmt.Errorf("%w: %d bytes, the limit is %d (Options.MaxConfigBytes)", ErrConfigTooLarge, len(cfg), maxBytes)
	}
	for n, rest := 1, cfg; len(rest) > 0; n++ {
		line := rest
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			line, rest = rest[:i], rest[i+1:]
		} else {
			rest = nil
		}
		if len(line) > MaxLineBytes {
			return fmt.Errorf("line %d is %d bytes, the limit is %d: %s", n, len(line), MaxLineBytes, encode.Printable(string(line)))
		}
	}
	return nil
}
