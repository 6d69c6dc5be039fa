// Shared by every kiln kernel: buffers are reached through device addresses (no descriptor
// sets), so a kernel's whole interface is its push constants. Each kernel is compiled once per
// element type with -DT=<glsl type> (and -DT_BYTES=4|8); see compile_shaders.sh.
#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require
#extension GL_EXT_buffer_reference : require
// Kernels on 2-byte elements (-DHALF_STORAGE) load and store uint16_t and widen it to 32 bits
// at once: that needs only the device's storageBuffer16BitAccess, no 16-bit arithmetic.
#if defined(HALF_STORAGE)
#extension GL_EXT_shader_16bit_storage : require
#endif

#define WORKGROUP 256

// The workgroup's linear index: launches wider than maxComputeWorkGroupCount[0] spill into y.
uint GroupIndex() { return gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x; }
uint Linear() { return GroupIndex() * WORKGROUP + gl_LocalInvocationID.x; }
// Invocations in the launch: element-wise kernels loop over i = Linear(), + Stride(), ... so a
// launch needs only enough workgroups to fill the device, not one per 256 elements.
uint Stride() { return gl_NumWorkGroups.x * gl_NumWorkGroups.y * WORKGROUP; }

// Typed views of a device address. bool lives on the device as a 32-bit 0/1.
layout(buffer_reference, std430, buffer_reference_align = 4) buffer F32s { float v[]; };
layout(buffer_reference, std430, buffer_reference_align = 8) buffer F64s { double v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer I32s { int v[]; };
layout(buffer_reference, std430, buffer_reference_align = 8) buffer I64s { int64_t v[]; };
layout(buffer_reference, std430, buffer_reference_align = 4) buffer U32s { uint v[]; };
layout(buffer_reference, std430, buffer_reference_align = 8) buffer U64s { uint64_t v[]; };
#if defined(HALF_STORAGE)
layout(buffer_reference, std430, buffer_reference_align = 2) buffer U16s { uint16_t v[]; };
#endif
