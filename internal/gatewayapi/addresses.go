package gatewayapi

import (
	"fmt"
	"strings"

	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"pier.dev/pier/internal/encode"
	"pier.dev/pier/internal/translate"
)

// gwAddress is what a Gateway's spec.addresses asks of IPAM.
type gwAddress struct {
	// pin is the one IP address the Gateway asks for ("" to let the
	// pools choose); it becomes its load balancer's RequestedFIP, which
	// IPAM grants or refuses as it does an Ingress's pier.dev/external-ip.
	pin string
	// unsupported, when set, refuses the Gateway
	// (Accepted=False/UnsupportedAddress): a type pier does not take or a
	// value that is no IP address.
	unsupported string
	// notUsable, when set, is why pier cannot use the addresses asked for
	// (Programmed=False/AddressNotUsable): the load balancer keeps what it
	// has, and a new one is not created, as for an address IPAM refuses.
	notUsable string
}

// gatewayAddress reads spec.addresses. pier's load balancer has one
// address a user may choose (the floating IP; the VIP is internal), so a
// Gateway may ask for at most one entry, of type IPAddress: with a value,
// that address; without one (the GatewayAddressEmpty feature), any from
// the pools. Hostname and named addresses are refused: pier assigns IPs.
func gatewayAddress(gw *gwv1.Gateway, opts translate.Options) gwAddress {
	var values []string
	for i, a := range gw.Spec.Addresses {
		typ := gwv1.IPAddressType
		if a.Type != nil {
			typ = *a.Type
		}
		if typ != gwv1.IPAddressType {
			return gwAddress{unsupported: fmt.Sprintf("spec.addresses[%d]: type %s is not supported: pier assigns IP addresses only (type IPAddress)",
				i, translate.Quote(string(typ)))}
		}
		if a.Value == "" {
			values = append(values, "")
			continue
		}
		ip, err := encode.IP(a.Value)
		if err != nil {
			return gwAddress{unsupported: fmt.Sprintf("spec.addresses[%d]: %s is not an IP address", i, translate.Quote(a.Value))}
		}
		values = append(values, ip.String())
	}
	switch {
	case len(values) == 0:
		return gwAddress{}
	case len(values) > 1:
		return gwAddress{notUsable: fmt.Sprintf(
			"pier binds one requested address per Gateway and %d are requested (%s): keep one", len(values), listForMessage(values))}
	case values[0] != "" && !opts.MayPin(gw.Namespace):
		return gwAddress{notUsable: fmt.Sprintf(
			"namespace %s may not pin addresses (--external-ip-namespaces): remove %s or pin from an allowed namespace", gw.Namespace, values[0])}
	}
	return gwAddress{pin: values[0]}
}

// listForMessage names each value, "(any)" for an empty one.
func listForMessage(values []string) string {
	out := make([]string, len(values))
	for i, v := range values {
		if v == "" {
			v = "(any)"
		}
		out[i] = v
	}
	return strings.Join(out, ", ")
}
