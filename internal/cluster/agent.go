package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"golang.org/x/sync/errgroup"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"pier.dev/pier/internal/agent"
	"pier.dev/pier/internal/api"
	"pier.dev/pier/internal/haproxy/render"
	"pier.dev/pier/internal/metrics"
	"pier.dev/pier/internal/statedir"
)

// DefaultAgentStateDir is where `pier agent` keeps its HAProxy folders
// unless --state-dir says otherwise; the controller's web view renders
// configs as an agent there would.
const DefaultAgentStateDir = "/var/lib/pier"

// AgentConfig is what `pier agent` takes from its flags.
type AgentConfig struct {
	Kubeconfig    string
	Node          string
	StateDir      string
	HAProxyBinary string
	APIAddr       string
	Render        render.Options
}

// RunAgent runs `pier agent` until ctx ends. HAProxy is left running when
// the agent exits: restarting the agent drops no request, and the next
// agent adopts the running instances (reloading only changed ones).
func RunAgent(ctx context.Context, cfg AgentConfig, logger *slog.Logger) error {
	if cfg.Node == "" {
		return errors.New("--node is required (the Node name this agent runs on)")
	}
	stateDir, err := statedir.Prepare(cfg.StateDir)
	if err != nil {
		return err
	}
	client, st, err := connect(cfg.Kubeconfig, logger)
	if err != nil {
		return err
	}
	defer st.Close()
	m := metrics.New()
	a := agent.New(agent.Config{
		Node: cfg.Node, StateDir: stateDir, Store: st, Secrets: apiSecrets{client},
		HAProxyBinary: cfg.HAProxyBinary, Render: cfg.Render, Metrics: m, Logger: logger,
	})
	g, ctx := errgroup.WithContext(ctx)
	if cfg.APIAddr != "" {
		srv := &api.Server{Store: st, Ingresses: noIngresses{}, Registry: m.Registry, Logger: logger}
		g.Go(func() error {
			// The API is for operators: the node keeps serving without it.
			if err := srv.ListenAndServe(ctx, cfg.APIAddr); err != nil && !errors.Is(err, context.Canceled) {
				logger.Error("api server", "error", err)
			}
			return nil
		})
	}
	g.Go(func() error { return orCanceled(a.Run(ctx)) })
	logger.Info("pier agent started", "node", cfg.Node, "state_dir", stateDir)
	if err := g.Wait(); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// apiSecrets reads TLS Secrets from the API server when a certificate is
// applied (rare: only when its content hash changes).
type apiSecrets struct{ client kubernetes.Interface }

func (s apiSecrets) TLSPair(namespace, name string) ([]byte, []byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sec, err := s.client.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, nil, fmt.Errorf("get secret: %w", err)
	}
	return sec.Data[corev1.TLSCertKey], sec.Data[corev1.TLSPrivateKeyKey], nil
}
