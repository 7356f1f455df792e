// Package gatewayfeatures lists the Gateway API features pier declares in
// a GatewayClass's status.supportedFeatures: the core features of the
// GATEWAY-HTTP, GATEWAY-GRPC, GATEWAY-TLS, GATEWAY-TCP and GATEWAY-UDP
// profiles and the extended ones that pass the upstream conformance
// suite (test/gatewayconformance, which reads them back from the class).
// A feature joins this list only with the suite's tests for it passing;
// docs/gateway-api.md says why each other one is left out.
//
// It imports nothing, so that the conformance suite's module (newer
// Kubernetes libraries) can use it too.
package gatewayfeatures

import "slices"

// supported is sorted in ascending order, as the Gateway API requires of
// status.supportedFeatures.
var supported = []string{
	"BackendTLSPolicy",
	"GRPCRoute",
	"GRPCRouteNamedRouteRule",
	"GRPCRouteRequestHeaderModifier",
	"Gateway",
	"GatewayAddressEmpty",
	"GatewayBackendClientCertificate",
	"GatewayFrontendClientCertificateValidation",
	"GatewayFrontendClientCertificateValidationInsecureFallback",
	"GatewayHTTPListenerIsolation",
	"GatewayHTTPSListenerDetectMisdirectedRequests",
	"GatewayInfrastructure",
	"GatewayPort8080",
	"GatewayRouteHostnameIntersectionPrecedence",
	"GatewayStaticAddresses",
	"HTTPRoute",
	"HTTPRoute303RedirectStatusCode",
	"HTTPRoute307RedirectStatusCode",
	"HTTPRoute308RedirectStatusCode",
	"HTTPRouteBackendProtocolH2C",
	"HTTPRouteBackendProtocolWebSocket",
	"HTTPRouteBackendRequestHeaderModification",
	"HTTPRouteBackendTimeout",
	"HTTPRouteBackendURLRewrite",
	"HTTPRouteCORS",
	"HTTPRouteDestinationPortMatching",
	"HTTPRouteHostRewrite",
	"HTTPRouteMethodMatching",
	"HTTPRouteNamedRouteRule",
	"HTTPRouteParentRefPort",
	"HTTPRoutePathRedirect",
	"HTTPRoutePathRewrite",
	"HTTPRoutePortRedirect",
	"HTTPRouteQueryParamMatching",
	"HTTPRouteRequestTimeout",
	"HTTPRouteResponseHeaderModification",
	"HTTPRouteRetryCodes",
	"HTTPRouteRetryConnectionError",
	"HTTPRouteSchemeRedirect",
	"ListenerSet",
	"ReferenceGrant",
	"TCPRoute",
	"TLSRoute",
	"TLSRouteModeMixed",
	"TLSRouteModeTerminate",
	"UDPRoute",
}

// Supported returns the features pier declares, sorted.
func Supported() []string { return slices.Clone(supported) }
