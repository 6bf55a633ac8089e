//! The simple and extended query handlers over one shared [`RetinaSession`].
//!
//! Every query runs at its own snapshot, taken when it executes (Execute, not Parse),
//! except inside a REPEATABLE READ or SERIALIZABLE transaction, whose queries share
//! the first one's ([`super::transaction`]). A result stream owns its snapshot, so
//! when a client disconnects mid-result, or cancels, pgwire drops the stream and the
//! snapshot is released (LWM moves on).

use std::fmt::Debug;
use std::sync::Arc;

use async_trait::async_trait;
use futures::Sink;
use pgwire::api::auth::StartupHandler;
use pgwire::api::cancel::{CancelHandler, DefaultCancelHandler};
use pgwire::api::portal::{Format, Portal};
use pgwire::api::query::{ExtendedQueryHandler, SimpleQueryHandler};
use pgwire::api::results::{FieldInfo, Response, Tag};
use pgwire::api::stmt::{QueryParser, StoredStatement};
use pgwire::api::store::PortalStore;
use pgwire::api::{ClientInfo, ClientPortalStore, ConnectionManager, PgWireServerHandlers, RandomPidSecretKeyGenerator, Type};
use pgwire::error::{PgWireError, PgWireResult};
use pgwire::messages::PgWireBackendMessage;
use pgwire::types::format::FormatOptions;
use retina_query::datafusion::logical_expr::LogicalPlan;
use retina_query::datafusion::sql::parser::Statement;
use retina_query::{ClientSettings, QueryStream, RetinaSession};

use super::column_names::postgres_column_names;
use super::copy_out::{copy_response, copy_to_stdout};
use super::cursors::{cursors_of, declared_query, CursorCommand, Cursors, PlannedCursor};
use super::encode::{fields, query_response};
use super::errors::{error_info, pg_error, user_error};
use super::param_types::{placeholder_types, with_declared_types};
use super::params::bind_parameters;
use super::startup::{ClientAuthentication, RetinaStartup};
use super::settings::{apply_setting, client_settings, within_timeout};
use super::statement::{setting_change, PgStatement, SessionCommand};
use super::transaction::transaction_of;

/// Everything pgwire needs for one server: the query and cancel handlers are shared
/// by all connections; each connection gets its own startup handler (it holds the
/// state of a password exchange).
pub struct RetinaHandlers {
    queries: Arc<RetinaQueries>,
    authentication: ClientAuthentication,
    connections: Arc<ConnectionManager>,
    pids: Arc<RandomPidSecretKeyGenerator>,
    cancel: Arc<DefaultCancelHandler>,
}

impl RetinaHandlers {
    pub fn new(session: Arc<RetinaSession>, authentication: ClientAuthentication) -> Self {
        let connections = Arc::new(ConnectionManager::new());
        Self {
            queries: Arc::new(RetinaQueries { parser: Arc::new(RetinaParser { session }) }),
            authentication,
            connections: Arc::clone(&connections),
            pids: Arc::new(RandomPidSecretKeyGenerator::default()),
            cancel: Arc::new(DefaultCancelHandler::new(connections)),
        }
    }
}

impl PgWireServerHandlers for RetinaHandlers {
    fn simple_query_handler(&self) -> Arc<impl SimpleQueryHandler> {
        Arc::clone(&self.queries)
    }

    fn extended_query_handler(&self) -> Arc<impl ExtendedQueryHandler> {
        Arc::clone(&self.queries)
    }

    fn startup_handler(&self) -> Arc<impl StartupHandler> {
        Arc::new(RetinaStartup::new(self.authentication.clone(), Arc::clone(&self.connections), Arc::clone(&self.pids)))
    }

    fn cancel_handler(&self) -> Arc<impl CancelHandler> {
        Arc::clone(&self.cancel)
    }
}

/// Turns SQL text into [`PgStatement`]s.
pub struct RetinaParser {
    session: Arc<RetinaSession>,
}

impl RetinaParser {
    /// `declared`: the parameter types of a Parse message (none for a simple query);
    /// `settings`: the connection's, at the time of planning.
    /// `cursors`: the connection's open cursors (a FETCH describes its cursor's rows).
    async fn prepare(
        &self,
        statement: Statement,
        declared: &[Option<Type>],
        settings: &ClientSettings,
        cursors: &Cursors,
    ) -> PgWireResult<PgStatement> {
        if let Some(command) = CursorCommand::of(&statement)? {
            return Ok(PgStatement::Cursor(match command {
                CursorCommand::Declare { name, query, hold } => {
                    let statement = declared_query(&query);
                    let plan = self.session.plan_in(statement.clone(), settings).await.map_err(pg_error)?;
                    let plan = with_declared_types(plan, declared)?;
                    let column_names = postgres_column_names(&statement, plan.schema().fields().len());
                    PlannedCursor::Declare { name, plan, column_names, hold }
                }
                CursorCommand::Fetch { name, count } => {
                    let (schema, column_names) = match cursors.describe(&name).await {
                        Ok((schema, names)) => (Some(schema), names),
                        Err(_) => (None, Vec::new()), // the error comes when it runs
                    };
                    PlannedCursor::Fetch { name, count, schema, column_names }
                }
                CursorCommand::Close { name } => PlannedCursor::Close { name },
            }));
        }
        if let Some(command) = SessionCommand::of(&statement) {
            return Ok(match setting_change(&statement) {
                Some(change) => PgStatement::Setting { command, change },
                None => PgStatement::Session(command),
            });
        }
        if let Some((query, format)) = copy_to_stdout(&statement)? {
            let plan = self.session.plan_in(query.clone(), settings).await.map_err(pg_error)?;
            let column_names = postgres_column_names(&query, plan.schema().fields().len());
            return Ok(PgStatement::CopyOut { plan, column_names, format });
        }
        let sql = statement.to_string();
        let names_of = statement.clone();
        let plan = self.session.plan_in(statement, settings).await.map_err(pg_error)?;
        let plan = with_declared_types(plan, declared)?;
        let column_names = postgres_column_names(&names_of, plan.schema().fields().len());
        Ok(PgStatement::Query { sql, plan, column_names })
    }
}

#[async_trait]
impl QueryParser for RetinaParser {
    type Statement = PgStatement;

    async fn parse_sql<C>(&self, client: &C, sql: &str, types: &[Option<Type>]) -> PgWireResult<Option<PgStatement>>
    where
        C: ClientInfo + Unpin + Send + Sync,
    {
        let prepared = async {
            let mut statements = self.session.parse(sql).map_err(pg_error)?;
            match statements.len() {
                0 => Ok(None),
                1 => self.prepare(statements.remove(0), types, &client_settings(client), &cursors_of(client)).await.map(Some),
                _ => Err(user_error("42601", "cannot insert multiple commands into a prepared statement")),
            }
        }
        .await;
        if prepared.is_err() {
            transaction_of(client).fail();
        }
        prepared
    }

    fn get_parameter_types(&self, statement: &PgStatement) -> PgWireResult<Vec<Type>> {
        match statement {
            PgStatement::Query { plan, .. } | PgStatement::Cursor(PlannedCursor::Declare { plan, .. }) => placeholder_types(plan)?
                .iter()
                .map(|data_type| match data_type {
                    Some(data_type) => arrow_pg::datatypes::into_pg_type(data_type),
                    None => Ok(Type::UNKNOWN),
                })
                .collect(),
            PgStatement::Session(_) | PgStatement::Setting { .. } | PgStatement::CopyOut { .. } | PgStatement::Cursor(_) => Ok(Vec::new()),
        }
    }

    fn get_result_schema(&self, statement: &PgStatement, format: Option<&Format>) -> PgWireResult<Vec<FieldInfo>> {
        match statement {
            PgStatement::Query { plan, column_names, .. } => {
                fields(plan.schema().as_arrow(), format.unwrap_or(&Format::UnifiedText), None, column_names)
            }
            PgStatement::Cursor(PlannedCursor::Fetch { schema: Some(schema), column_names, .. }) => {
                fields(schema, format.unwrap_or(&Format::UnifiedText), None, column_names)
            }
            // COPY describes its columns in its CopyOutResponse.
            PgStatement::Session(_) | PgStatement::Setting { .. } | PgStatement::CopyOut { .. } | PgStatement::Cursor(_) => Ok(Vec::new()),
        }
    }
}

/// The query handlers.
pub struct RetinaQueries {
    parser: Arc<RetinaParser>,
}

impl RetinaQueries {
    /// Runs a cursor statement; `plan` of a DECLARE has its parameters bound.
    async fn run_cursor<C: ClientInfo>(
        &self,
        client: &C,
        cursor: &PlannedCursor,
        format: &Format,
        settings: &ClientSettings,
        bind: impl FnOnce(&LogicalPlan) -> PgWireResult<LogicalPlan>,
    ) -> PgWireResult<Response> {
        let cursors = cursors_of(client);
        match cursor {
            PlannedCursor::Declare { name, plan, column_names, hold } => {
                let plan = bind(plan)?;
                let results = within_timeout(settings.statement_timeout, execute(&self.parser.session, client, plan));
                Ok(Response::Execution(cursors.declare(name.clone(), results.await?, column_names.clone(), *hold).await?))
            }
            PlannedCursor::Fetch { name, count, .. } => {
                Ok(Response::Query(cursors.fetch(name, *count, format, format_options(client)).await?))
            }
            PlannedCursor::Close { name } => Ok(Response::Execution(cursors.close(name.as_deref()).await?)),
        }
    }
}

/// Runs `plan` at the snapshot the connection's transaction holds, or a fresh one.
async fn execute<C: ClientInfo>(session: &RetinaSession, client: &C, plan: LogicalPlan) -> PgWireResult<QueryStream> {
    match transaction_of(client).held_snapshot(session)? {
        Some(snapshot) => session.execute_at(plan, &snapshot).await.map_err(pg_error),
        None => session.execute(plan).await.map_err(pg_error),
    }
}

/// A transaction command: its effect on the connection's transaction; the end of a
/// transaction also closes its cursors.
async fn session_command<C: ClientInfo>(client: &C, command: SessionCommand) -> Response {
    let tag = transaction_of(client).apply(command);
    if matches!(command, SessionCommand::Commit | SessionCommand::Rollback) {
        cursors_of(client).end_transaction().await;
    }
    match tag {
        Some(tag) => Response::TransactionEnd(Tag::new(tag)),
        None => session_response(command),
    }
}

fn session_response(command: SessionCommand) -> Response {
    let tag = Tag::new(command.tag());
    match command {
        SessionCommand::Begin { .. } => Response::TransactionStart(tag),
        SessionCommand::Commit | SessionCommand::Rollback => Response::TransactionEnd(tag),
        _ => Response::Execution(tag),
    }
}

fn format_options<C: ClientInfo>(client: &C) -> Option<Arc<FormatOptions>> {
    Some(Arc::new(FormatOptions::from_client_metadata(client.metadata())))
}

#[async_trait]
impl SimpleQueryHandler for RetinaQueries {
    async fn do_query<C>(&self, client: &mut C, query: &str) -> PgWireResult<Vec<Response>>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let session = &self.parser.session;
        let statements = session.parse(query).map_err(pg_error)?;
        let mut responses = Vec::with_capacity(statements.len());
        // Like PostgreSQL: statements run in order; the first error ends the batch and
        // the results before it are still sent.
        for statement in statements {
            let outcome = async {
                // Planned and run with the settings as the statements before it left them.
                let settings = client_settings(client);
                let options = format_options(client);
                transaction_of(client).admit(|| SessionCommand::of(&statement))?;
                match self.parser.prepare(statement, &[], &settings, &cursors_of(client)).await? {
                    PgStatement::Session(command) => Ok(session_command(client, command).await),
                    PgStatement::Cursor(cursor) => {
                        self.run_cursor(client, &cursor, &Format::UnifiedText, &settings, |plan| Ok(plan.clone())).await
                    }
                    PgStatement::Setting { command, change } => {
                        apply_setting(client, change);
                        Ok(session_response(command))
                    }
                    PgStatement::Query { plan, column_names, .. } => {
                        let response = within_timeout(settings.statement_timeout, async {
                            let results = execute(session, client, plan).await?;
                            query_response(results, &Format::UnifiedText, options, &column_names).await
                        });
                        Ok(Response::Query(response.await?))
                    }
                    PgStatement::CopyOut { plan, column_names, format } => {
                        let results = within_timeout(settings.statement_timeout, execute(session, client, plan));
                        Ok(Response::CopyOut(copy_response(results.await?, &format, &column_names)?))
                    }
                }
            }
            .await;
            match outcome {
                Ok(response) => responses.push(response),
                Err(PgWireError::UserError(info)) => {
                    transaction_of(client).fail();
                    responses.push(Response::Error(info));
                    break;
                }
                Err(other) => return Err(other),
            }
        }
        Ok(responses)
    }
}

#[async_trait]
impl ExtendedQueryHandler for RetinaQueries {
    type Statement = PgStatement;
    type QueryParser = RetinaParser;

    fn query_parser(&self) -> Arc<RetinaParser> {
        Arc::clone(&self.parser)
    }

    async fn do_query<C>(&self, client: &mut C, portal: &Portal<PgStatement>, _max_rows: usize) -> PgWireResult<Response>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let settings = client_settings(client);
        transaction_of(client).admit(|| match &portal.statement.statement {
            PgStatement::Session(command) | PgStatement::Setting { command, .. } => Some(*command),
            _ => None,
        })?;
        let outcome = self.run_portal(client, portal, &settings).await;
        if outcome.is_err() {
            transaction_of(client).fail();
        }
        outcome
    }
}

impl RetinaQueries {
    /// Runs one bound statement of the extended protocol.
    async fn run_portal<C>(&self, client: &mut C, portal: &Portal<PgStatement>, settings: &ClientSettings) -> PgWireResult<Response>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = PgStatement>,
    {
        match &portal.statement.statement {
            PgStatement::Session(command) => Ok(session_command(client, *command).await),
            PgStatement::Cursor(cursor) => {
                let response = self.run_cursor(client, cursor, &portal.result_column_format, settings, |plan| bind_portal(portal, plan)).await?;
                match cursor {
                    // A cursor is also a portal of its name: psycopg describes it so.
                    PlannedCursor::Declare { name, .. } => {
                        let (schema, column_names) = cursors_of(client).describe(name).await?;
                        let fetch = PlannedCursor::Fetch { name: name.clone(), count: None, schema: Some(schema), column_names };
                        let statement = StoredStatement::new(name.clone(), PgStatement::Cursor(fetch), Vec::new());
                        client.portal_store().put_portal(Arc::new(Portal::new_cursor(name.clone(), Arc::new(statement))));
                    }
                    PlannedCursor::Close { name: Some(name) } => client.portal_store().rm_portal(name),
                    _ => {}
                }
                Ok(response)
            }
            PgStatement::Setting { command, change } => {
                apply_setting(client, change.clone());
                Ok(session_response(*command))
            }
            PgStatement::CopyOut { plan, column_names, format } => {
                let results = within_timeout(settings.statement_timeout, execute(&self.parser.session, client, plan.clone()));
                Ok(Response::CopyOut(copy_response(results.await?, format, column_names)?))
            }
            PgStatement::Query { plan, column_names, .. } => {
                let plan = bind_portal(portal, plan)?;
                let options = format_options(client);
                let response = within_timeout(settings.statement_timeout, async {
                    let results = execute(&self.parser.session, client, plan).await?;
                    query_response(results, &portal.result_column_format, options, column_names).await
                });
                Ok(Response::Query(response.await?))
            }
        }
    }
}

/// `plan` with the parameters `portal` binds in place of its placeholders.
fn bind_portal(portal: &Portal<PgStatement>, plan: &LogicalPlan) -> PgWireResult<LogicalPlan> {
    let types = placeholder_types(plan)?;
    if types.is_empty() {
        return Ok(plan.clone());
    }
    let values = bind_parameters(portal, &types)?;
    plan.clone()
        .replace_params_with_values(&values)
        .map_err(|e| PgWireError::UserError(Box::new(error_info(&retina_query::QueryError::DataFusion(e)))))
}
