package nodesim

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"pier.dev/pier/internal/echo"
)

// podAddrs are the addresses the kubelet knows when it starts a container
// and exposes through status.* field references.
type podAddrs struct {
	podIP, hostIP string
}

// containerEnv resolves c's environment the way the kubelet does: in
// order, literal values with $(VAR) expanded against the variables defined
// before them, and valueFrom.fieldRef read from the pod. Sources a test
// double cannot honour (Secrets, ConfigMaps, resources, envFrom) are an
// error, as a missing one is for the kubelet (CreateContainerConfigError),
// rather than a silently empty variable.
func containerEnv(pod *corev1.Pod, c *corev1.Container, addrs podAddrs) (map[string]string, error) {
	if len(c.EnvFrom) > 0 {
		return nil, fmt.Errorf("container %s: envFrom is not supported by nodesim", c.Name)
	}
	env := make(map[string]string, len(c.Env))
	lookup := func(name string) (string, bool) {
		v, ok := env[name]
		return v, ok
	}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = expand(e.Value, lookup)
		case e.ValueFrom.FieldRef != nil:
			v, err := fieldValue(pod, e.ValueFrom.FieldRef.FieldPath, addrs)
			if err != nil {
				return nil, fmt.Errorf("container %s: env %s: %w", c.Name, e.Name, err)
			}
			env[e.Name] = v
		default:
			return nil, fmt.Errorf("container %s: env %s: only value and valueFrom.fieldRef are supported by nodesim", c.Name, e.Name)
		}
	}
	return env, nil
}

// fieldValue answers the downward-API paths the kubelet accepts for env.
func fieldValue(pod *corev1.Pod, path string, addrs podAddrs) (string, error) {
	if key, ok := subscript(path, "metadata.labels"); ok {
		return pod.Labels[key], nil
	}
	if key, ok := subscript(path, "metadata.annotations"); ok {
		return pod.Annotations[key], nil
	}
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.podIP", "status.podIPs":
		return addrs.podIP, nil // single-stack: the list has one entry
	case "status.hostIP", "status.hostIPs":
		return addrs.hostIP, nil
	}
	return "", fmt.Errorf("field path %q is not supported", path)
}

// subscript reads base['key'].
func subscript(path, base string) (string, bool) {
	rest, ok := strings.CutPrefix(path, base+"['")
	if !ok {
		return "", false
	}
	return strings.CutSuffix(rest, "']")
}

// expand implements the kubelet's $(VAR) syntax: a defined variable is
// replaced, an undefined one stays as written, $$ is a literal $, and any
// other $ is kept.
func expand(s string, lookup func(string) (string, bool)) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString("$(")
				i++
				continue
			}
			name := s[i+2 : i+2+end]
			if v, ok := lookup(name); ok {
				b.WriteString(v)
			} else {
				b.WriteString("$(" + name + ")")
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

// echoConfig is what the upstream echo image reports given env: the same
// variable names, with the pod's own metadata when a variable is unset (the
// image would report "", which only hides a wrong manifest).
func echoConfig(pod *corev1.Pod, env map[string]string) echo.Config {
	or := func(v, fallback string) string {
		if v == "" {
			return fallback
		}
		return v
	}
	return echo.Config{
		Namespace: or(env["NAMESPACE"], pod.Namespace),
		Ingress:   env["INGRESS_NAME"],
		Service:   env["SERVICE_NAME"],
		Pod:       or(env["POD_NAME"], pod.Name),
	}
}
