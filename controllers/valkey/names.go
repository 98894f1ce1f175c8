package valkey

import (
	"fmt"

	giteav1alpha1 "github.com/kdag-dev/kdag/apis/gitea/v1alpha1"
	"github.com/kdag-dev/kdag/controllers/common"
)

// Port is the port Valkey serves on.
const Port = 6379

// ServiceName is the name of the Service in front of the Valkey named vkName: the component's
// output.
func ServiceName(vkName string) string { return vkName }

// Address is "host:port" of the Valkey named vkName in namespace.
func Address(vkName, namespace string) string {
	return fmt.Sprintf("%s.%s.svc:%d", ServiceName(vkName), namespace, Port)
}

func labels(v *giteav1alpha1.Valkey) map[string]string {
	return common.Labels("valkey", v.Name, "cache")
}
