package control

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Sentinel errors. Expected outcomes of a command (a stale version, a stale lease) come back
// in Result.Err wrapping one of these; the FSM never panics on a command.
var (
	// ErrInvalidCommand: the command cannot be decoded or fails validation.
	ErrInvalidCommand = errors.New("control: invalid command")
	// ErrVersionConflict: SetConfig's ExpectVersion is not the current config version.
	ErrVersionConflict = errors.New("control: config version conflict")
	// ErrLeaseConflict: a lease move's From/Epoch no longer match the table (stale handoff).
	ErrLeaseConflict = errors.New("control: lease conflict")
	// ErrUnknownMember: a lease move names a member the registry does not hold.
	ErrUnknownMember = errors.New("control: unknown member")
)

// CommandType is the first byte of an encoded command. The JSON body after it belongs to
// that type; an incompatible change to a command gets a new type byte, never a new meaning
// for an old one, so logs written by older nodes replay identically.
type CommandType byte

// Command types (wire values: never renumber).
const (
	TypeSetConfig      CommandType = 1
	TypeBlockDomain    CommandType = 2
	TypeUnblockDomain  CommandType = 3
	TypePause          CommandType = 4
	TypeResume         CommandType = 5
	TypeRegisterMember CommandType = 6
	TypeRemoveMember   CommandType = 7
	TypeAssignLeases   CommandType = 8
	TypeForceLease     CommandType = 9
	TypeGrantPages     CommandType = 10
	TypeReturnPages    CommandType = 11
)

// Command is one state change. Times in commands are the proposer's clock: Apply never
// reads a clock, so every replica computes the same state.
type Command interface{ Type() CommandType }

// SetConfig replaces the job configuration if its version is still ExpectVersion.
// Config.Version and Config.UpdatedAt are ignored (the FSM sets them).
type SetConfig struct {
	Config        JobConfig `json:"config"`
	ExpectVersion uint64    `json:"expect_version"`
	At            time.Time `json:"at"`
}

// BlockDomain adds a domain (and so its subdomains) to the blocked list.
type BlockDomain struct {
	Domain string    `json:"domain"`
	At     time.Time `json:"at"`
}

// UnblockDomain removes a domain from the blocked list.
type UnblockDomain struct {
	Domain string    `json:"domain"`
	At     time.Time `json:"at"`
}

// Pause stops fetching cluster-wide.
type Pause struct {
	At time.Time `json:"at"`
}

// Resume undoes Pause.
type Resume struct {
	At time.Time `json:"at"`
}

// RegisterMember adds or updates a member. On update the addresses and Voter flag are
// replaced and JoinedAt is kept.
type RegisterMember struct {
	Name string     `json:"name"`
	Info MemberInfo `json:"info"`
}

// RemoveMember drops a member from the registry. Its leases are left as they are: moving
// them is a separate, explicit ForceLease or AssignLeases.
type RemoveMember struct {
	Name string `json:"name"`
}

// LeaseMove moves Partition from From at Epoch to To (at Epoch+1).
type LeaseMove struct {
	Partition uint16 `json:"partition"`
	From      string `json:"from"`
	To        string `json:"to"`
	Epoch     uint64 `json:"epoch"` // the epoch the mover last saw; the new epoch is Epoch+1
}

// AssignLeases applies a batch of cooperative moves (the old owner streamed the partition
// and agrees), all or none: every move's From and Epoch must match the table, otherwise
// nothing changes and Result.Conflicts lists the current leases of the stale partitions.
// Initial assignment is a batch of moves from ("", 0).
type AssignLeases struct {
	Moves []LeaseMove `json:"moves"`
	At    time.Time   `json:"at"`
}

// ForcedMove moves Partition from a dead owner From to To without its consent.
type ForcedMove struct {
	Partition uint16 `json:"partition"`
	From      string `json:"from"`
	To        string `json:"to"`
}

// ForceLease takes leases from an owner that has been dead longer than the grace period
// (the caller judges that from gossip; the FSM has no clock). All or none: each From must
// still own its partition (any epoch), so a force decided on an old table is refused. The
// epoch becomes the current epoch plus one, which fences the old owner's transfers.
type ForceLease struct {
	Moves []ForcedMove `json:"moves"`
	At    time.Time    `json:"at"`
}

// GrantPages asks for Ask more pages of the job's page limit for Node, and reports the
// fetches it has recorded against its grants so far (Spent, absolute: a repeat is
// harmless). The grant is GrantSize's (0 once the limit is given out); Result.Budget is
// the member's share after it, so a member that lost an answer learns its grants from the
// next one.
type GrantPages struct {
	Node  string `json:"node"`
	Spent int64  `json:"spent"`
	Ask   int64  `json:"ask"` // 0: report Spent only
}

// ReturnPages gives back the part of Node's grants it has not spent (a member with no work
// left): its grant becomes its spending, Spent as in GrantPages.
type ReturnPages struct {
	Node  string `json:"node"`
	Spent int64  `json:"spent"`
}

func (SetConfig) Type() CommandType      { return TypeSetConfig }
func (GrantPages) Type() CommandType     { return TypeGrantPages }
func (ReturnPages) Type() CommandType    { return TypeReturnPages }
func (BlockDomain) Type() CommandType    { return TypeBlockDomain }
func (UnblockDomain) Type() CommandType  { return TypeUnblockDomain }
func (Pause) Type() CommandType          { return TypePause }
func (Resume) Type() CommandType         { return TypeResume }
func (RegisterMember) Type() CommandType { return TypeRegisterMember }
func (RemoveMember) Type() CommandType   { return TypeRemoveMember }
func (AssignLeases) Type() CommandType   { return TypeAssignLeases }
func (ForceLease) Type() CommandType     { return TypeForceLease }

// PartitionLease is one partition's lease, as reported in a Result.
type PartitionLease struct {
	Partition uint16
	Owner     string
	Epoch     uint64
}

// Result is what applying a command returned. Err is nil or wraps ErrInvalidCommand,
// ErrVersionConflict, ErrLeaseConflict or ErrUnknownMember; on error nothing changed.
type Result struct {
	Index         uint64           // Raft index the command was applied at
	Err           error            // the command's outcome; not a transport error
	Changed       bool             // the state changed (false for no-ops such as blocking twice)
	ConfigVersion uint64           // config version after the command
	Leases        []PartitionLease // after a lease command: the new leases of the moved partitions
	Conflicts     []PartitionLease // on ErrLeaseConflict: the current leases of the stale partitions
	Granted       int64            // GrantPages: the pages granted by this command
	Budget        *PageBudget      // GrantPages, ReturnPages: the member's share after the command
}

// Encode returns the wire form of cmd: one type byte, then JSON.
func Encode(cmd Command) ([]byte, error) {
	if cmd == nil {
		return nil, fmt.Errorf("%w: nil command", ErrInvalidCommand)
	}
	body, err := json.Marshal(cmd)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidCommand, err)
	}
	return append([]byte{byte(cmd.Type())}, body...), nil
}

// Decode parses the wire form Encode writes.
func Decode(b []byte) (Command, error) {
	if len(b) < 1 {
		return nil, fmt.Errorf("%w: empty", ErrInvalidCommand)
	}
	var cmd Command
	var err error
	switch t := CommandType(b[0]); t {
	case TypeSetConfig:
		cmd, err = decodeAs[SetConfig](b[1:])
	case TypeBlockDomain:
		cmd, err = decodeAs[BlockDomain](b[1:])
	case TypeUnblockDomain:
		cmd, err = decodeAs[UnblockDomain](b[1:])
	case TypePause:
		cmd, err = decodeAs[Pause](b[1:])
	case TypeResume:
		cmd, err = decodeAs[Resume](b[1:])
	case TypeRegisterMember:
		cmd, err = decodeAs[RegisterMember](b[1:])
	case TypeRemoveMember:
		cmd, err = decodeAs[RemoveMember](b[1:])
	case TypeAssignLeases:
		cmd, err = decodeAs[AssignLeases](b[1:])
	case TypeForceLease:
		cmd, err = decodeAs[ForceLease](b[1:])
	case TypeGrantPages:
		cmd, err = decodeAs[GrantPages](b[1:])
	case TypeReturnPages:
		cmd, err = decodeAs[ReturnPages](b[1:])
	default:
		return nil, fmt.Errorf("%w: unknown type %d", ErrInvalidCommand, t)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidCommand, err)
	}
	return cmd, nil
}

func decodeAs[T Command](body []byte) (Command, error) {
	var v T
	if err := json.Unmarshal(body, &v); err != nil {
		return nil, err
	}
	return v, nil
}
