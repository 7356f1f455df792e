package render

import (
	"errors"
	"fmt"

	"pier.dev/pier/internal/encode"
	"pier.dev/pier/internal/haproxy/layout"
	"pier.dev/pier/internal/model"
)

// Client certificate validation (model.Listener.ClientValidation, a
// Gateway's spec.tls.frontend) is per port, so it goes on the listener's
// TLS bind, where every certificate of the crt-list inherits it:
//
//	bind <vip>:<port> ... ssl crt-list <list> ca-file <lb>/certs/clientca-<digest>.pem verify required
//
// HAProxy then asks every client for a certificate and ends the
// handshake with a TLS alert when none comes or its chain does not lead
// to the bundle (no HTTP answer: the request is never read). Optional
// (AllowInsecureFallback) is "verify optional" with every verification
// error ignored (ca-ignore-err all, crt-ignore-err all): the certificate
// is asked for, and a connection without one, or with one that fails,
// goes on as if it had none.

// checkClientValidation validates a listener's client validation.
func checkClientValidation(l *model.Listener, lv *listenerView) error {
	cv := l.ClientValidation
	if cv == nil {
		return nil
	}
	if !lv.tls || len(l.Certificates) == 0 {
		return errors.New("client validation on a listener that terminates no TLS")
	}
	if len(cv.CAs) == 0 {
		return errors.New("client validation names no CA")
	}
	lv.clientValidation = cv
	return nil
}

// clientCAFiles names the CA file of each listener's client validation,
// in the certs folder by the bundle's digest (the agent writes it there).
func clientCAFiles(v *view, at layout.LB) error {
	for i := range v.listeners {
		l := &v.listeners[i]
		if l.clientValidation == nil {
			continue
		}
		path, err := at.ClientCA(l.clientValidation.SHA256)
		if err != nil {
			return fmt.Errorf("listener %d: %w", l.port, err)
		}
		l.clientCAPath = path
	}
	return nil
}

// clientVerifyWords are the bind words of l's client validation; none
// without one.
func clientVerifyWords(l *listenerView) []encode.Word {
	if l.clientValidation == nil {
		return nil
	}
	words := []encode.Word{encode.Lit("ca-file"), encode.FilePath(l.clientCAPath), encode.Lit("verify")}
	if !l.clientValidation.Optional {
		return append(words, encode.Lit("required"))
	}
	return append(words, encode.Lit("optional"),
		encode.Lit("ca-ignore-err"), encode.Lit("all"), encode.Lit("crt-ignore-err"), encode.Lit("all"))
}
