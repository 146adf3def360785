//! The gRPC side of a provider daemon: the `ProviderService` adapter over a `Provider`, and `serve`, which
//! adds health and reflection and listens on a unix socket or TCP with mutual TLS.

mod call;
mod listen;

use std::{pin::Pin, sync::Arc};

use futures::{Stream, StreamExt};
use tonic::{Request, Response, Status};

use self::call::Call;
pub use self::listen::{Bound, Listen, ListenError, TlsFiles, bind};
use crate::{
    convert::provider_id_from_wire,
    model::{CreateRequest, ListFilter, ProviderInfo},
    proto::{self, provider_service_server::ProviderService},
    provider::Provider,
};

/// Instances per ListByTag page: small enough to keep messages far below the 4 MiB default limit.
pub const LIST_PAGE_SIZE: usize = 256;

/// `ProviderService` over a `Provider`: validates, calls, classifies, observes.
#[derive(Debug)]
pub struct ProviderGrpc<P> {
    provider: Arc<P>,
    info: Arc<ProviderInfo>,
}

impl<P> Clone for ProviderGrpc<P> {
    fn clone(&self) -> Self {
        Self {
            provider: self.provider.clone(),
            info: self.info.clone(),
        }
    }
}

impl<P: Provider> ProviderGrpc<P> {
    pub fn new(provider: P) -> Self {
        let info = Arc::new(provider.info());
        Self {
            provider: Arc::new(provider),
            info,
        }
    }

    /// The tonic service to add to a router.
    pub fn into_service(self) -> proto::provider_service_server::ProviderServiceServer<Self> {
        proto::provider_service_server::ProviderServiceServer::new(self)
    }

    fn call(&self, rpc: &'static str, instance: &str, metadata: &tonic::metadata::MetadataMap) -> Call {
        Call::start(&self.info.provider_type, rpc, instance, metadata)
    }
}

type PageStream = Pin<Box<dyn Stream<Item = Result<proto::ListByTagResponse, Status>> + Send>>;

#[tonic::async_trait]
impl<P: Provider> ProviderService for ProviderGrpc<P> {
    async fn get_info(
        &self,
        request: Request<proto::GetInfoRequest>,
    ) -> Result<Response<proto::GetInfoResponse>, Status> {
        let info = self.info.clone();
        self.call("GetInfo", "", request.metadata())
            .run(async move { Ok((&*info).into()) })
            .await
    }

    async fn create(&self, request: Request<proto::CreateRequest>) -> Result<Response<proto::CreateResponse>, Status> {
        let call = self.call("Create", &request.get_ref().name, request.metadata());
        let wire = request.into_inner();
        call.run(async {
            let request = CreateRequest::from_wire(wire, &self.info.limits)?;
            let instance = self.provider.create(request).await?;
            Ok(proto::CreateResponse {
                instance: Some((&instance).into()),
            })
        })
        .await
    }

    async fn get(&self, request: Request<proto::GetRequest>) -> Result<Response<proto::GetResponse>, Status> {
        let call = self.call("Get", &request.get_ref().provider_id, request.metadata());
        call.run(async {
            let id = provider_id_from_wire(&request.get_ref().provider_id, &self.info.provider_type)?;
            let instance = self.provider.get(&id).await?;
            Ok(proto::GetResponse {
                instance: Some((&instance).into()),
            })
        })
        .await
    }

    async fn delete(&self, request: Request<proto::DeleteRequest>) -> Result<Response<proto::DeleteResponse>, Status> {
        let call = self.call("Delete", &request.get_ref().provider_id, request.metadata());
        call.run(async {
            let id = provider_id_from_wire(&request.get_ref().provider_id, &self.info.provider_type)?;
            self.provider.delete(&id).await?;
            Ok(proto::DeleteResponse {})
        })
        .await
    }

    type ListByTagStream = PageStream;

    /// The log line covers opening the listing; a failure mid-stream ends the stream with that error.
    async fn list_by_tag(&self, request: Request<proto::ListByTagRequest>) -> Result<Response<PageStream>, Status> {
        let call = self.call("ListByTag", "", request.metadata());
        let wire = request.into_inner();
        let provider_type = self.info.provider_type.clone();
        call.run(async {
            let filter = ListFilter::from_wire(wire)?;
            let instances = self.provider.list_by_tag(filter).await?;
            let pages = instances.ready_chunks(LIST_PAGE_SIZE).map(move |chunk| {
                let instances = chunk.into_iter().collect::<Result<Vec<_>, _>>();
                match instances {
                    Ok(page) => Ok(proto::ListByTagResponse { instances: page.iter().map(Into::into).collect() }),
                    Err(error) => {
                        tracing::warn!(provider = %provider_type, rpc = "ListByTag", class = error.class().as_str(), error = %error, "listing failed");
                        Err(error.to_status(&provider_type))
                    }
                }
            });
            Ok(Box::pin(pages) as PageStream)
        })
        .await
    }

    async fn check(&self, request: Request<proto::CheckRequest>) -> Result<Response<proto::CheckResponse>, Status> {
        self.call("Check", "", request.metadata())
            .run(async {
                let mut results = self.provider.check().await;
                results.sort_by(|a, b| a.target.cmp(&b.target));
                Ok(proto::CheckResponse {
                    results: results.iter().map(Into::into).collect(),
                })
            })
            .await
    }
}
