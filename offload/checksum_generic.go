package offload

// checksum is the implementation Checksum uses on this platform.
var checksum = checksumGeneric
