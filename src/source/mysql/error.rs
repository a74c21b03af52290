//! How the MySQL source classifies driver and server errors into what the collector does next.
//!
//! Connection loss, lock wait timeouts and deadlocks are server errors (retried); a lost
//! connection also loses the snapshot, so the retry of a page of that snapshot answers
//! `ExpiredCursor` and the run's policy decides. Access denied is `Forbidden` (R14). An unknown
//! table or column, or a predicate the server cannot parse, is fatal and names what is wrong.
//! Messages never hold the DSN or a password: the server's own messages do not quote them.

use mysql_async::Error as DriverError;

/// What an error means for the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Class {
    /// Retry; the connection (and its snapshot) is still good.
    Retry,
    /// Retry; the connection or its transaction is gone, and with it the snapshot.
    Lost,
    /// The server stopped the statement for taking too long: a timeout.
    Timeout,
    /// Access denied.
    Forbidden,
    /// The configuration cannot work against this server; the message says why.
    Fatal(String),
}

/// Server error codes that mean access denied: database (1044), user (1045), table (1142),
/// column (1143), a privilege (1227), a routine (1370), no password (1698), an account locked
/// (3118 in MySQL, 4151 in MariaDB).
const FORBIDDEN: &[u16] = &[1044, 1045, 1142, 1143, 1227, 1370, 1698, 3118, 4151];
/// Codes after which the connection or its transaction is gone: server shutdown (1053),
/// network errors (1158-1161), deadlock (1213, rolls the transaction back), connection killed
/// (1927 in MariaDB), disconnected for inactivity (4031 in MySQL).
const LOST: &[u16] = &[1053, 1158, 1159, 1160, 1161, 1213, 1927, 4031];
/// Statement time limits: MariaDB `max_statement_time` (1969), MySQL `max_execution_time`
/// (3024).
const TIMEOUT: &[u16] = &[1969, 3024];

/// Classifies an error.
pub(crate) fn classify(e: &DriverError) -> Class {
    match e {
        DriverError::Server(s) => {
            let code = s.code;
            if FORBIDDEN.contains(&code) {
                Class::Forbidden
            } else if LOST.contains(&code) {
                Class::Lost
            } else if TIMEOUT.contains(&code) {
                Class::Timeout
            } else if let Some(what) = fatal_what(code) {
                Class::Fatal(format!("{what} (server error {code}: {})", s.message))
            } else {
                // Lock wait timeout (1205), too many connections (1040, 1203), an interrupted
                // query (1317) and anything unknown: retried; when it persists the page fails
                // (R13), which is `unknown`, never a wrong verdict.
                Class::Retry
            }
        }
        DriverError::Url(_) => Class::Fatal("the DSN cannot be used".into()),
        // I/O, protocol and driver errors leave the connection in an unknown state.
        DriverError::Io(_) | DriverError::Driver(_) | DriverError::Other(_) => Class::Lost,
    }
}

fn fatal_what(code: u16) -> Option<&'static str> {
    Some(match code {
        1049 => "unknown database",
        1146 => "unknown table",
        1054 => "unknown column",
        1052 => "ambiguous column",
        1064 => "a predicate is not valid SQL",
        1109 => "unknown table in a predicate",
        1305 | 1630 => "unknown function in a predicate",
        1582 | 1583 => "wrong arguments to a function in a predicate",
        _ => return None,
    })
}
