# Custom SDK container for Dataflow (and for portable runners with --environment_type DOCKER).
#
# Dataflow recommends a custom container when the workers need heavy dependencies
# such as TensorFlow: installing them from --requirements_file on every worker at
# start-up takes minutes and can drift. The base image's Beam version must equal
# the apache-beam pin in requirements.txt; its entry point (/opt/apache/beam/boot)
# is kept, as Dataflow requires.
#
#   docker build -t REGION-docker.pkg.dev/PROJECT/REPO/image-corpus:2.70.0 .
#   docker push REGION-docker.pkg.dev/PROJECT/REPO/image-corpus:2.70.0
#
# then run with --sdk_container_image=<that tag> --sdk_location=container (docs/runners.md, "Dataflow").
ARG BEAM_VERSION=2.70.0
FROM apache/beam_python3.11_sdk:${BEAM_VERSION}

# The glibc settings of beam_pipeline/launcher/memory.py, for SDK workers the command line did not start:
# two malloc arenas per process, so the heap does not grow with the number of pairs.
ENV MALLOC_ARENA_MAX=2

WORKDIR /opt/image-corpus
COPY requirements.txt .
RUN pip install --no-cache-dir -r requirements.txt \
    && python -c "import apache_beam, tensorflow_transform, PIL, imagecodecs, simplejpeg; print(apache_beam.__version__)"
COPY setup.py README.md ./
COPY beam_pipeline beam_pipeline
COPY trainer trainer
COPY native_stderr native_stderr
COPY command_console command_console
RUN pip install --no-cache-dir --no-deps . \
    && python -m beam_pipeline --help > /dev/null
