//! The MCP protocol side of the server: `initialize`, `tools/list`, `tools/call` dispatch,
//! and the strict reading of tool arguments (unknown keys refused with the key meant).

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CustomRequest, CustomResult,
    ErrorCode, Implementation, ListToolsResult, PaginatedRequestParams, ServerCapabilities,
    ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Map, Value};

use super::outcome::error_answer;
use super::{read, scan, tools, Server};
use crate::contract::closest;

/// Guidance the server gives agents when they connect.
const INSTRUCTIONS: &str = "scanledger scans paginated sources to the end and proves (or refuses to prove) completeness. \
Call scan_collection with a source the operator declared; trust ids and counts only when outcome is \"inventory\". \
An \"incomplete_read\" holds what was seen so far (a lower bound) and the resume_scan call that continues it; \
a \"failed_read\" means the enumeration is defective.";

impl ServerHandler for Server {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("scanledger", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools::catalogue(
            self.shared.options.catalog.names(),
        )))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = Args(request.arguments.unwrap_or_default());
        let answer = match request.name.as_ref() {
            tools::SCAN => scan::scan_collection(self, &args, &context).await,
            tools::RESUME => scan::resume_scan(self, &args, &context).await,
            tools::RECEIPT => read::get_receipt(self, &args).await,
            tools::VERIFY => read::verify_receipt(self, &args).await,
            tools::DIFF => read::diff_runs(self, &args).await,
            tools::MISSING => read::missing_ids(self, &args).await,
            tools::PAGE => read::page_run(self, &args).await,
            tools::LIST => read::list_runs(self, &args).await,
            other => {
                return Err(ErrorData::invalid_params(
                    format!("unknown tool {:?}", crate::receipt::terminal_safe(other)),
                    None,
                ))
            }
        };
        Ok(match answer {
            Ok(v) => CallToolResult::structured(v),
            Err(message) => CallToolResult::structured_error(error_answer(&message)),
        }
        .into())
    }

    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        Err(super::frame::oversized_error(&request).unwrap_or_else(|| {
            ErrorData::new(
                ErrorCode::METHOD_NOT_FOUND,
                format!(
                    "method {:?} not found",
                    crate::receipt::terminal_safe(&request.method)
                ),
                None,
            )
        }))
    }
}

/// A tool's arguments, read strictly.
pub(crate) struct Args(pub(crate) Map<String, Value>);

impl Args {
    /// Refuses keys outside `known`, naming the closest known one.
    pub(crate) fn only(&self, known: &[&str]) -> Result<(), String> {
        for k in self.0.keys() {
            if !known.contains(&k.as_str()) {
                let hint = closest(k, known)
                    .map(|c| format!("; did you mean {c:?}?"))
                    .unwrap_or_default();
                return Err(format!(
                    "unknown argument {:?}{hint} (the arguments are {})",
                    crate::receipt::terminal_safe(k),
                    known.join(", ")
                ));
            }
        }
        Ok(())
    }

    pub(crate) fn get(&self, key: &str) -> Option<&Value> {
        self.0.get(key).filter(|v| !v.is_null())
    }

    pub(crate) fn string(&self, key: &str) -> Result<Option<&str>, String> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(format!("argument {key:?} must be a string")),
        }
    }

    pub(crate) fn u64_in(&self, key: &str, max: u64) -> Result<Option<u64>, String> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v
                .as_u64()
                .filter(|n| (1..=max).contains(n))
                .map(Some)
                .ok_or_else(|| format!("argument {key:?} must be an integer from 1 to {max}")),
        }
    }
}
