package render

import (
	"fmt"

	"pier.dev/pier/internal/encode"
	"pier.dev/pier/internal/model"
)

// protocolWords are the server-line words for each backend protocol.
// TLS is not verified and sends no SNI, as ingress-nginx's defaults
// (proxy-ssl-verify off, proxy-ssl-server-name off); a pool's
// UpstreamTLS replaces these words (upstream.go). GRPCS asks for h2
// by ALPN, which gRPC servers require; GRPC speaks h2 in clear (h2c),
// which needs prior knowledge (proto h2). A server with ssl is also
// checked over TLS.
var protocolWords = map[model.BackendProtocol][]encode.Word{
	"":                 nil,
	model.BackendHTTPS: {encode.Lit("ssl"), encode.Lit("verify"), encode.Lit("none")},
	model.BackendGRPC:  {encode.Lit("proto"), encode.Lit("h2")},
	model.BackendGRPCS: {encode.Lit("ssl"), encode.Lit("verify"), encode.Lit("none"), encode.Lit("alpn"), encode.Lit("h2")},
}

// protocolOf validates the pool's protocol again: the model may come
// from a store.
func protocolOf(p model.BackendProtocol) ([]encode.Word, error) {
	words, ok := protocolWords[p]
	if !ok {
		return nil, fmt.Errorf("unknown backend protocol %s", encode.Printable(string(p)))
	}
	return words, nil
}
