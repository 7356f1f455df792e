package model

// ClientValidation is a TLS listener's check of client certificates (a
// Gateway's spec.tls.frontend, for the listeners of one port). The CA
// bundle stays in its ConfigMaps, as a certificate's key material stays
// in its Secret: the agent reads them again, joins their ca.crt in
// order, and serves the bundle only while its canonical form still
// hashes to SHA256.
type ClientValidation struct {
	// CAs are the ConfigMaps whose ca.crt, in this order, make the
	// bundle (at least one).
	CAs []ConfigMapRef `json:"cas"`
	// SHA256 is the hex digest of the canonical bundle
	// (tlscert.ParseCA of the joined ca.crt).
	SHA256 string `json:"sha256"`
	// Optional accepts clients without a certificate or with one that
	// fails verification (the Gateway API's AllowInsecureFallback): the
	// handshake is never refused for it. Otherwise a client without a
	// valid certificate fails the handshake (AllowValidOnly).
	Optional bool `json:"optional,omitempty"`
}

// ConfigMapRef names a ConfigMap.
type ConfigMapRef struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}
