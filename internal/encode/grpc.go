package encode

import "strings"

// MaxGRPCName bounds a gRPC service or method name, as the Gateway API's
// GRPCMethodMatch does.
const MaxGRPCName = 1024

// A GRPCRoute method match becomes a match on the request's :path,
// which gRPC writes as "/" service "/" method. The names are held to what
// the Gateway API's CRD allows (an API server checks them; pier run's
// files are read by no API server), so that a name is never anything but
// identifier characters and dots in a path.

// GRPCService validates a gRPC service name: a protobuf full name,
// identifiers of letters, digits and '_' (not starting with a digit)
// joined by dots, with an optional leading dot.
func GRPCService(s string) (Value, error) {
	const k = "grpc service"
	if s == "" || len(s) > MaxGRPCName {
		return Value{}, refuse(k, "length", s, "must be 1-"+itoa(MaxGRPCName)+" characters")
	}
	for i, part := range strings.Split(strings.TrimPrefix(s, "."), ".") {
		if err := grpcIdentifier(k, s, part); err != nil {
			if part == "" {
				return Value{}, refuse(k, "syntax", s, "has an empty name between dots (part "+itoa(i+1)+")")
			}
			return Value{}, err
		}
	}
	return Value{s: s}, nil
}

// GRPCMethod validates a gRPC method name: one identifier of letters,
// digits and '_', not starting with a digit.
func GRPCMethod(s string) (Value, error) {
	const k = "grpc method"
	if s == "" || len(s) > MaxGRPCName {
		return Value{}, refuse(k, "length", s, "must be 1-"+itoa(MaxGRPCName)+" characters")
	}
	if err := grpcIdentifier(k, s, s); err != nil {
		return Value{}, err
	}
	return Value{s: s}, nil
}

func grpcIdentifier(k, whole, id string) error {
	if id == "" {
		return refuse(k, "syntax", whole, "must not be empty")
	}
	for i := 0; i < len(id); i++ {
		if !grpcNameChars[id[i]] {
			return refuse(k, "charset", whole, "contains "+describeByte(id[i])+"; allowed are letters, digits and '_' (and '.' between a service's names)")
		}
	}
	if id[0] >= '0' && id[0] <= '9' {
		return refuse(k, "syntax", whole, "a name must not start with a digit")
	}
	return nil
}

var grpcNameChars = charset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")

// GRPCMethodPath is the :path of an Exact match of both names.
func GRPCMethodPath(service, method Value) string {
	return "/" + service.s + "/" + method.s
}

// GRPCMethodRegex is the :path expression of a RegularExpression method
// match: each of service and method ("" for any name) a regular
// expression of ParseValueRegex's subset, validated on its own first
// (so that neither can close the other's group), then both anchored as
// whole names of the path: ^/(?:service)/(?:method)$.
func GRPCMethodRegex(service, method string) (PathRegex, error) {
	part := func(k, s string) (string, error) {
		if s == "" {
			return "[^/]+", nil
		}
		if _, err := parseRegex(k, s, false); err != nil {
			return "", err
		}
		return "(?:" + s + ")", nil
	}
	svc, err := part("grpc service regex", service)
	if err != nil {
		return PathRegex{}, err
	}
	m, err := part("grpc method regex", method)
	if err != nil {
		return PathRegex{}, err
	}
	return parseRegex("grpc method regex", "/"+svc+"/"+m+"$", true)
}
