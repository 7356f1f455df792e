package model

// Problem is something wrong with one source object. Severity Error means
// the object was refused whole; Warning means it is served but something
// was ignored.
type Problem struct {
	Kind      string   `json:"kind"`
	Namespace string   `json:"namespace"`
	Name      string   `json:"name"`
	Severity  Severity `json:"severity"`
	Reason    string   `json:"reason"` // CamelCase, as a Kubernetes Event reason
	Field     string   `json:"field,omitempty"`
	Message   string   `json:"message"`
}

// Severity of a Problem.
type Severity string

const (
	SeverityError   Severity = "Error"
	SeverityWarning Severity = "Warning"
)
