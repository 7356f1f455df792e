package conformance

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// EchoImage is the container image of the echo Deployments; whatever plays
// the kubelet runs the echo server for it.
const EchoImage = "registry.k8s.io/ingress-controller-conformance/echoserver"

// CreateBackend implements Cluster as upstream's NewEchoDeployment does:
// a Deployment "<ingress>-<service>" and a Service "<service>" are created
// unless they exist, then the Service's ready endpoints are awaited.
func (c *KubeCluster) CreateBackend(ctx context.Context, ns, ingressName, serviceName string, port networkingv1.ServiceBackendPort, replicas int) error {
	name := deploymentName(ingressName, serviceName)
	deployments := c.client.AppsV1().Deployments(ns)
	if _, err := deployments.Get(ctx, name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		dep := echoDeployment(name, ingressName, serviceName, port.Name, int32(replicas))
		if _, err := deployments.Create(ctx, dep, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating deployment %s: %w", name, err)
		}
	} else if err != nil {
		return err
	}
	services := c.client.CoreV1().Services(ns)
	if _, err := services.Get(ctx, serviceName, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: serviceName},
			Spec: corev1.ServiceSpec{
				Selector: map[string]string{"app": name},
				Ports:    []corev1.ServicePort{servicePort(port)},
			},
		}
		if _, err := services.Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating service %s: %w", serviceName, err)
		}
	} else if err != nil {
		return err
	}
	return c.waitEndpoints(ctx, ns, serviceName, replicas)
}

// ScaleBackend implements Cluster: the Deployment's scale subresource,
// then a wait for that many ready endpoints.
func (c *KubeCluster) ScaleBackend(ctx context.Context, ns, ingressName, serviceName string, replicas int) error {
	name := deploymentName(ingressName, serviceName)
	deployments := c.client.AppsV1().Deployments(ns)
	scale, err := deployments.GetScale(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	scale.Spec.Replicas = int32(replicas)
	if _, err := deployments.UpdateScale(ctx, name, scale, metav1.UpdateOptions{}); err != nil {
		return err
	}
	return c.waitEndpoints(ctx, ns, serviceName, replicas)
}

// echoDeployment is upstream's Deployment template: the echo container on
// port 3000 (named after the Ingress port name), its identity in the
// environment, a readiness probe on /health.
func echoDeployment(name, ingressName, serviceName, portName string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	field := func(env, path string) corev1.EnvVar {
		return corev1.EnvVar{Name: env, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType},
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name:  "ingress-conformance-echo",
					Image: EchoImage,
					Env: []corev1.EnvVar{
						field("POD_NAME", "metadata.name"),
						field("NAMESPACE", "metadata.namespace"),
						{Name: "INGRESS_NAME", Value: ingressName},
						{Name: "SERVICE_NAME", Value: serviceName},
					},
					Ports: []corev1.ContainerPort{{Name: portName, ContainerPort: EchoPort}},
					ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
						HTTPGet: &corev1.HTTPGetAction{Path: "/health", Port: intstr.FromInt32(EchoPort)},
					}},
				}}},
			},
		},
	}
}

// waitEndpoints waits until the Service's EndpointSlices list exactly want
// ready addresses (upstream counts the ready addresses of its Endpoints).
func (c *KubeCluster) waitEndpoints(ctx context.Context, ns, service string, want int) error {
	var got []string
	err := poll(ctx, 500*time.Millisecond, c.cfg.EndpointsTimeout, func() (bool, error) {
		var err error
		got, err = c.readyAddresses(ctx, ns, service)
		return err == nil && len(got) == want, nil
	})
	if err != nil {
		return fmt.Errorf("service %s/%s: %d ready endpoints %v, want %d: %w; pods: %s",
			ns, service, len(got), got, want, err, c.podSummary(ctx, ns))
	}
	return nil
}

func (c *KubeCluster) readyAddresses(ctx context.Context, ns, service string) ([]string, error) {
	slices, err := c.client.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{
		LabelSelector: discoveryv1.LabelServiceName + "=" + service,
	})
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, s := range slices.Items {
		for _, e := range s.Endpoints {
			if e.Conditions.Ready != nil && !*e.Conditions.Ready {
				continue
			}
			for _, a := range e.Addresses {
				seen[a] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for a := range seen {
		out = append(out, a)
	}
	sort.Strings(out)
	return out, nil
}

// podSummary is "name phase node ip" for every pod in ns, for errors.
func (c *KubeCluster) podSummary(ctx context.Context, ns string) string {
	pods, err := c.client.CoreV1().Pods(ns).List(context.WithoutCancel(ctx), metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	var parts []string
	for _, p := range pods.Items {
		parts = append(parts, fmt.Sprintf("%s %s %s %s", p.Name, p.Status.Phase, p.Spec.NodeName, p.Status.PodIP))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "; ")
}
