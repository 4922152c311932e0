package sqlitetrigger_test

// childFile names the database file a child process of the kill tests
// works on; the test binary started with it set runs the child test only.
const childFile = "SQLITETRIGGER_TEST_CHILD_FILE"
