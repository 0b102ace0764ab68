package packaging

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/continuityd/continuityd/config"
)

type k8sMount struct {
	Name      string `yaml:"name"`
	MountPath string `yaml:"mountPath"`
}

type k8sContainer struct {
	Name         string     `yaml:"name"`
	Args         []string   `yaml:"args"`
	VolumeMounts []k8sMount `yaml:"volumeMounts"`
	Env          []struct {
		Name  string `yaml:"name"`
		Value string `yaml:"value"`
	} `yaml:"env"`
}

type k8sVolume struct {
	Name      string          `yaml:"name"`
	EmptyDir  *map[string]any `yaml:"emptyDir"`
	ConfigMap *struct {
		Name string `yaml:"name"`
	} `yaml:"configMap"`
}

type k8sDoc struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Data map[string]string `yaml:"data"`
	Spec struct {
		Template struct {
			Spec struct {
				Containers []k8sContainer `yaml:"containers"`
				Volumes    []k8sVolume    `yaml:"volumes"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

// TestKubernetesSidecar: the example parses as YAML; the continuityd
// sidecar shares the agent's workdir and socket volumes, mounts the config
// it is started with, keeps its state on an emptyDir, and the config is
// valid, with a nats upstream and the agent's workdir on the shared volume.
func TestKubernetesSidecar(t *testing.T) {
	var docs []k8sDoc
	files, _ := filepath.Glob("kubernetes/*.yaml")
	if len(files) == 0 {
		t.Fatal("no kubernetes/*.yaml")
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(raw))
		for {
			var d k8sDoc
			if err := dec.Decode(&d); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			docs = append(docs, d)
		}
	}
	var dep *k8sDoc
	cms := map[string]k8sDoc{}
	for i, d := range docs {
		switch d.Kind {
		case "Deployment":
			dep = &docs[i]
		case "ConfigMap":
			cms[d.Metadata.Name] = d
		}
	}
	if dep == nil {
		t.Fatal("no Deployment")
	}
	spec := dep.Spec.Template.Spec
	var sidecar, agent *k8sContainer
	for i, c := range spec.Containers {
		if c.Name == "continuityd" {
			sidecar = &spec.Containers[i]
		} else {
			agent = &spec.Containers[i]
		}
	}
	if sidecar == nil || agent == nil {
		t.Fatalf("want an agent and a continuityd container, got %+v", spec.Containers)
	}
	i := slices.Index(sidecar.Args, "--config")
	if len(sidecar.Args) == 0 || sidecar.Args[0] != "run" || i < 0 || i+1 >= len(sidecar.Args) {
		t.Fatalf("sidecar args %q: want run --config FILE", sidecar.Args)
	}
	cfgFile := sidecar.Args[i+1]
	mountOf := func(c *k8sContainer, vol string) string {
		for _, m := range c.VolumeMounts {
			if m.Name == vol {
				return m.MountPath
			}
		}
		return ""
	}
	volume := func(name string) *k8sVolume {
		for i, v := range spec.Volumes {
			if v.Name == name {
				return &spec.Volumes[i]
			}
		}
		return nil
	}
	// The config: a ConfigMap volume mounted where --config points.
	var cfgVol *k8sVolume
	for _, m := range sidecar.VolumeMounts {
		if v := volume(m.Name); v != nil && v.ConfigMap != nil && path.Dir(cfgFile) == m.MountPath {
			cfgVol = v
		}
	}
	if cfgVol == nil {
		t.Fatalf("the sidecar does not mount a ConfigMap at %s", path.Dir(cfgFile))
	}
	cm, ok := cms[cfgVol.ConfigMap.Name]
	if !ok || cm.Data[path.Base(cfgFile)] == "" {
		t.Fatalf("no ConfigMap %q with %s", cfgVol.ConfigMap.Name, path.Base(cfgFile))
	}
	cfg, err := config.Decode([]byte(cm.Data[path.Base(cfgFile)]), "configmap.yaml")
	if err != nil {
		t.Fatalf("the ConfigMap's config: %v", err)
	}
	if len(cfg.Agents) != 1 || cfg.Upstreams[cfg.Agents[0].Upstreams[0]].Kind != config.KindNATS {
		t.Fatalf("want one agent shipping to a nats upstream: %+v", cfg)
	}
	// The workdir: one volume both containers mount, where the config says.
	shared := ""
	for _, m := range sidecar.VolumeMounts {
		if m.MountPath == cfg.Agents[0].Workdir && mountOf(agent, m.Name) == m.MountPath {
			shared = m.Name
		}
	}
	if shared == "" {
		t.Fatalf("the agent's workdir %s is not a volume both containers mount", cfg.Agents[0].Workdir)
	}
	// The socket: shared too, and named to the agent.
	sockDir := filepath.Dir(cfg.Daemon.Socket)
	sockShared := false
	for _, m := range sidecar.VolumeMounts {
		sockShared = sockShared || (m.MountPath == sockDir && mountOf(agent, m.Name) == sockDir)
	}
	envOK := false
	for _, e := range agent.Env {
		envOK = envOK || (e.Name == "CONTINUITYD_SOCKET" && e.Value == cfg.Daemon.Socket)
	}
	if !sockShared || !envOK {
		t.Errorf("the socket %s is not shared with the agent (mount %v, CONTINUITYD_SOCKET %v)", cfg.Daemon.Socket, sockShared, envOK)
	}
	// The state: ephemeral, the fleet being the durable copy.
	stateOK := false
	for _, m := range sidecar.VolumeMounts {
		if v := volume(m.Name); m.MountPath == cfg.Daemon.StateDir && v != nil && v.EmptyDir != nil {
			stateOK = true
		}
	}
	if !stateOK {
		t.Errorf("the state directory %s is not on an emptyDir volume", cfg.Daemon.StateDir)
	}
}
