package kube

import (
	"path/filepath"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"pier.dev/pier/test/kubeapi"
)

// serviceAccountKubeconfig writes a kubeconfig that authenticates as the
// ServiceAccount ns/name with a bound token, so pier runs with exactly the
// permissions deploy/rbac.yaml grants it, as it would in a pod.
func serviceAccountKubeconfig(t *testing.T, client kubernetes.Interface, srv *kubeapi.Server, dir, ns, name string) string {
	t.Helper()
	expiry := int64(4 * 3600)
	tr, err := client.CoreV1().ServiceAccounts(ns).CreateToken(t.Context(), name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token for %s/%s: %v", ns, name, err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["test"] = &clientcmdapi.Cluster{Server: srv.Host(), CertificateAuthorityData: srv.Config().CAData}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: "test", AuthInfo: name}
	cfg.CurrentContext = name
	path := filepath.Join(dir, name+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}
